"""The audit's sample: seeded, stratified over the gates' groups, one unit per prompt while prompts last."""

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
    """``per_group`` units of each group of each gate (all of a smaller group), drawn with ``seed``.

    Within a group, the prompts are shuffled and one unit of each is drawn in turn (a second round only once every
    prompt has one), so the labelled units are as independent as the prompts: the audited interval's rectifier
    reads them as independent draws of the population's units.

    Example:
        >>> from t2i_fairness.audit.units import JudgedUnit
        >>> units = tuple(JudgedUnit(f"u{i}", "", "p", "q?", "", i % 2, "K=1", i // 4) for i in range(40))
        >>> drawn = draw_sample({"g": JudgedShare("s", units)}, 5, seed=0)
        >>> len(drawn), len({d.unit.cluster for d in drawn})
        (5, 5)
    """
    if int(per_group) < 1:
        raise ValueError(f"`per_group` must be >= 1, but got {per_group}")
    out: list[Drawn] = []
    for gate in sorted(shares):
        groups: dict[str, list[JudgedUnit]] = {}
        for u in shares[gate].units:
            groups.setdefault(u.group, []).append(u)
        for group in sorted(groups):
            rng = np.random.default_rng([int(seed), *map(ord, f"{gate}\x1f{group}")])
            by_cluster: dict[int, list[JudgedUnit]] = {}
            for u in groups[group]:
                by_cluster.setdefault(u.cluster, []).append(u)
            queues = [list(np.array(by_cluster[c], dtype=object)[rng.permutation(len(by_cluster[c]))])
                      for c in rng.permutation(sorted(by_cluster))]
            picked: list[JudgedUnit] = []
            while len(picked) < per_group and any(queues):
                for q in queues:
                    if q and len(picked) < per_group:
                        picked.append(q.pop())
            out += [Drawn(gate, u) for u in picked]
    return out
