"""The judgements a gate over a judged share rests on, as the run writes them and the audit reads them.

A study whose gate is a share of per-image yes/no judgements (CIS: is each named component in the image?) attaches
a :class:`JudgedShare` to its indicator; the gate writes it to ``<artifacts>/judged/<gate>.json`` on every run, and
``t2i-fairness audit`` and ``--t2i-audit`` read it back through :func:`judged_units`, whichever scorer judged.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

__all__ = ["JudgedShare", "JudgedUnit", "judged_units", "write_judged"]

FOLDER = "judged"


@dataclass(frozen=True)
class JudgedUnit:
    """One yes/no judgement: ``unit`` (its id, unique in the run), the ``image`` file, the ``question`` a person
    answers (the scorer's judgement put as a question), ``asked`` (how the scorer was asked), ``judged`` (the
    scorer's answer, 1 yes), ``group`` (the stratum: the gate's group) and ``cluster`` (its prompt: units of one
    prompt are not independent)."""

    unit: str
    image: str
    prompt: str
    question: str
    asked: str
    judged: int
    group: str
    cluster: int


@dataclass(frozen=True)
class JudgedShare:
    """A gate's value as the mean of its units' judgements (``scorer`` names who judged)."""

    scorer: str
    units: tuple[JudgedUnit, ...]

    @property
    def value(self) -> float:
        return float(np.mean([u.judged for u in self.units])) if self.units else float("nan")

    def cluster_means(self) -> np.ndarray:
        """The mean judgement of each prompt (the independent units of the scorer-only term)."""
        clusters = np.array([u.cluster for u in self.units])
        judged = np.array([u.judged for u in self.units], dtype=float)
        _, inverse = np.unique(clusters, return_inverse=True)
        return np.bincount(inverse, weights=judged) / np.bincount(inverse)


def _file_name(gate: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\[\]=-]", "_", gate) + ".json"


def write_judged(artifacts: Path | str, gate: str, share: JudgedShare, seed: int) -> Path:
    """Write ``share`` as ``<artifacts>/judged/<gate>.json`` (atomically; the same run writes the same bytes)."""
    from t2i_fairness.base.files import atomic_write_bytes

    data = {"gate": gate, "seed": int(seed), "scorer": share.scorer, "value": share.value,
            "units": [asdict(u) for u in share.units]}
    path = Path(artifacts) / FOLDER / _file_name(gate)
    return atomic_write_bytes(path, (json.dumps(data, indent=0, sort_keys=True) + "\n").encode(), skip_if_same=True,
                              fsync=False)


def judged_units(run: Path | str) -> tuple[int, dict[str, JudgedShare]]:
    """``(seed, {gate: JudgedShare})`` of a run's artifacts folder (the folder holding ``run.json``).

    Raises:
        ValueError: no ``judged/`` folder (the run judged no share, or is older than the audit), files of
            several seeds, or a file that is not one this module wrote (naming it).
    """
    folder = Path(run) / FOLDER
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not files:
        raise ValueError(f"{run}: no {FOLDER}/*.json: the run judged no share (its gates over judged shares, e.g. "
                         "test_cis[k..], write them to --t2i-artifacts on every run)")
    seeds, out = set(), {}
    for path in files:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            units = tuple(JudgedUnit(**u) for u in data["units"])
            seeds.add(int(data["seed"]))
            out[str(data["gate"])] = JudgedShare(str(data["scorer"]), units)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}: not a judged-share file ({type(exc).__name__}: {exc})") from None
    if len(seeds) > 1:
        raise ValueError(f"{folder}: files of several seeds {sorted(seeds)}; audit one run at a time")
    return seeds.pop(), out
