"""The audit's sample: seeded, stratified over the gates' groups, at most one unit per prompt."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from t2i_fairness.audit.units import JudgedShare, JudgedUnit

__all__ = ["Drawn", "draw_sample"]


@dataclass(frozen=True)
class Drawn:
    gate: str
    unit: JudgedUnit


def draw_sample(shares: dict[str, JudgedShare], per_group: int, seed: int) -> list[Drawn]:
    """Up to ``per_group`` units of each group of each gate, at most one per prompt, drawn with ``seed``.

    Within a group, the prompts are shuffled and one unit of each is drawn, so the labelled units are independent
    draws of the population's units, as the audited interval's rectifier reads them (a prompt's second unit would
    move with its first: a group has at most as many labels as prompts). The draw depends on the seed, the group's
    name and its units only, so gates judging the same group (the word-level gates of one prompt's images, whose
    every image is its own draw) draw the same units and the page asks each once.

    Example:
        >>> from t2i_fairness.audit.units import JudgedUnit
        >>> units = tuple(JudgedUnit(f"u{i}", "", "p", "q?", "", i % 2, "K=1", i // 4) for i in range(40))
        >>> drawn = draw_sample({"g": JudgedShare("s", units)}, 5, seed=0)
        >>> len(drawn), len({d.unit.cluster for d in drawn}), len(draw_sample({"g": JudgedShare("s", units)}, 50, 0))
        (5, 5, 10)
    """
    if int(per_group) < 1:
        raise ValueError(f"`per_group` must be >= 1, but got {per_group}")
    out: list[Drawn] = []
    for gate in sorted(shares):
        groups: dict[str, list[JudgedUnit]] = {}
        for u in shares[gate].units:
            groups.setdefault(u.group, []).append(u)
        for group in sorted(groups):
            rng = np.random.default_rng([int(seed), *map(ord, group)])
            by_cluster: dict[int, list[JudgedUnit]] = {}
            for u in groups[group]:
                by_cluster.setdefault(u.cluster, []).append(u)
            picked = [by_cluster[c][rng.integers(len(by_cluster[c]))] for c in rng.permutation(sorted(by_cluster))]
            picked = picked[:per_group]
            out += [Drawn(gate, u) for u in picked]
    return out
