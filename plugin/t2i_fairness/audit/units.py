"""The judgements a gate over a judged share rests on, as the run writes them and the audit reads them.

A study whose gate is made of per-image yes/no judgements (CIS: is each named component in the image? word-level: does
the image show the group?) attaches
a :class:`JudgedShare` to its indicator; the gate writes it to ``<artifacts>/judged/<gate>.json.gz`` on every run, and
``t2i-fairness audit`` and ``--t2i-audit`` read it back through :func:`judged_units`, whichever scorer judged.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

__all__ = ["FORMS", "JudgedShare", "JudgedUnit", "judged_units", "write_judged"]

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


FORMS = ("mean", "worst", "linear", "distance")


@dataclass(frozen=True)
class JudgedShare:
    """A gate's value made of its units' judgements (``scorer`` names who judged), in one of :data:`FORMS`:

    - ``mean`` (CIS_K): the mean of every unit's judgement, the units clustered by prompt;
    - ``worst`` (the CIS component rate floor): the lowest of the groups' means, each clustered by prompt, picked
      among ``total`` groups (Bonferroni);
    - ``linear`` (the CIS drop per component): ``sum_g w_g mean_g`` over the groups of ``weights``, each clustered
      by prompt;
    - ``distance`` (word-level): ``|sum_g w_g mean_g - centre|`` over the groups of ``weights`` (each group one
      prompt text, its images independent draws).
    """

    scorer: str
    units: tuple[JudgedUnit, ...]
    form: str = "mean"
    weights: tuple[tuple[str, float], ...] = ()
    centre: float = 0.0
    total: int | None = None

    def __post_init__(self) -> None:
        if self.form not in FORMS:
            raise ValueError(f"`form` must be one of {FORMS}, but got {self.form!r}")

    def by_group(self) -> dict[str, "JudgedShare"]:
        """Each group's units, as a ``mean`` (one pass over the units)."""
        out: dict[str, list[JudgedUnit]] = {}
        for u in self.units:
            out.setdefault(u.group, []).append(u)
        return {g: JudgedShare(self.scorer, tuple(us)) for g, us in out.items()}

    def group_means(self) -> dict[str, float]:
        """Each group's mean judgement (one pass over the units)."""
        names, inverse = np.unique([u.group for u in self.units], return_inverse=True)
        judged = np.array([u.judged for u in self.units], dtype=float)
        return dict(zip(names.tolist(), (np.bincount(inverse, weights=judged) / np.bincount(inverse)).tolist()))

    @property
    def clustered(self) -> bool:
        """Whether units of one prompt move together (all but a ``distance``'s images)."""
        return self.form != "distance"

    @property
    def groups(self) -> list[str]:
        """The groups the value reads: the weighted ones of a ``linear`` or ``distance``, else every group with a unit."""
        if self.form in ("linear", "distance"):
            return [g for g, w in self.weights if w != 0.0]
        return sorted({u.group for u in self.units})

    @property
    def value(self) -> float:
        if not self.units:
            return float("nan")
        if self.form == "worst":
            return min(self.group_means().values())
        if self.form in ("linear", "distance"):
            means = self.group_means()
            total = sum(w * means.get(g, float("nan")) for g, w in self.weights if w != 0.0) - self.centre
            return abs(total) if self.form == "distance" else total
        return float(np.mean([u.judged for u in self.units]))

    def cluster_means(self) -> np.ndarray:
        """The mean judgement of each prompt (the independent units of the scorer-only term)."""
        clusters = np.array([u.cluster for u in self.units])
        judged = np.array([u.judged for u in self.units], dtype=float)
        _, inverse = np.unique(clusters, return_inverse=True)
        return np.bincount(inverse, weights=judged) / np.bincount(inverse)


def _file_name(gate: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\[\]=-]", "_", gate) + ".json.gz"


def write_judged(artifacts: Path | str, gate: str, share: JudgedShare, seed: int) -> Path:
    """Write ``share`` as ``<artifacts>/judged/<gate>.json.gz`` (columns, each prompt's texts once; gzip without a
    time stamp: the same run writes the same bytes)."""
    import gzip

    from t2i_fairness.base.files import atomic_write_bytes

    texts: dict[tuple[str, str], int] = {}
    for u in share.units:
        texts.setdefault((u.prompt, u.asked), len(texts))
    columns = {name: [getattr(u, name) for u in share.units] for name in ("unit", "image", "question", "judged",
                                                                          "group", "cluster")}
    columns["text"] = [texts[(u.prompt, u.asked)] for u in share.units]
    data = {"gate": gate, "seed": int(seed), "scorer": share.scorer, "value": share.value,
            "texts": [list(t) for t in texts], "columns": columns}
    if share.form != "mean":
        data.update(form=share.form, weights=[list(w) for w in share.weights], centre=share.centre, total=share.total)
    raw = json.dumps(data, separators=(",", ":"), sort_keys=True).encode()
    path = Path(artifacts) / FOLDER / _file_name(gate)
    return atomic_write_bytes(path, gzip.compress(raw, compresslevel=6, mtime=0), skip_if_same=True, fsync=False)


def _read(path: Path) -> tuple[int, str, JudgedShare]:
    import gzip

    data = json.loads(gzip.decompress(path.read_bytes()))
    c, texts = data["columns"], data["texts"]
    units = tuple(JudgedUnit(unit, image, texts[t][0], question, texts[t][1], int(judged), group, int(cluster))
                  for unit, image, question, judged, group, cluster, t in zip(
                      c["unit"], c["image"], c["question"], c["judged"], c["group"], c["cluster"], c["text"]))
    form = {"form": data["form"], "weights": tuple((str(g), float(w)) for g, w in data["weights"]),
            "centre": float(data["centre"]), "total": data["total"]} if "form" in data else {}
    return int(data["seed"]), str(data["gate"]), JudgedShare(str(data["scorer"]), units, **form)


def judged_units(run: Path | str) -> tuple[int, dict[str, JudgedShare]]:
    """``(seed, {gate: JudgedShare})`` of a run's artifacts folder (the folder holding ``run.json``).

    Raises:
        ValueError: no ``judged/`` folder (the run judged no share, or is older than the audit), files of
            several seeds, or a file that is not one this module wrote (naming it).
    """
    folder = Path(run) / FOLDER
    files = sorted(folder.glob("*.json.gz")) if folder.is_dir() else []
    if not files:
        raise ValueError(f"{run}: no {FOLDER}/*.json.gz: the run judged no share (its gates over judged shares, "
                         "e.g. test_cis[k..], write them to --t2i-artifacts when decided at N)")
    seeds, out = set(), {}
    for path in files:
        try:
            seed, gate, share = _read(path)
        except (OSError, EOFError, ValueError, KeyError, TypeError, IndexError) as exc:
            raise ValueError(f"{path}: not a judged-share file ({type(exc).__name__}: {exc})") from None
        seeds.add(seed)
        out[gate] = share
    if len(seeds) > 1:
        raise ValueError(f"{folder}: files of several seeds {sorted(seeds)}; audit one run at a time")
    return seeds.pop(), out
