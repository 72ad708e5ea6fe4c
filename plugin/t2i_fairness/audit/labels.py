"""Human labels (the CSV the labelling page saves), read and checked against the run they claim to audit.

Columns: ``seed,gate,unit,question,label`` (more columns are kept for people and ignored); ``label`` is
``yes``, ``no`` or ``skip`` (a skipped unit is not a label). Refused with the file and line: a missing column, a
label that is none of those, a unit labelled twice for one gate, a seed that is not the run's (:func:`read_labels`); a unit the
gate never judged or a question that is not the one the scorer was asked (:func:`labels_for`).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

from t2i_fairness.audit.units import JudgedShare

__all__ = ["COLUMNS", "Label", "Labels", "LabelsError", "labels_for", "read_labels"]

COLUMNS = ("seed", "gate", "unit", "question", "label")
ANSWERS = {"yes": 1, "no": 0, "skip": None}


class LabelsError(ValueError):
    """A label file that does not match the run: the message names the file and line."""


@dataclass(frozen=True)
class Label:
    gate: str
    unit: str
    question: str
    truth: int | None  # 1 yes, 0 no, None skipped
    line: int


@dataclass(frozen=True)
class Labels:
    """A checked label file: its ``path`` and its rows by ``(gate, unit)``."""

    path: Path
    seed: int
    rows: dict = field(default_factory=dict, compare=False, hash=False)

    def __len__(self) -> int:
        return sum(1 for r in self.rows.values() if r.truth is not None)

    def of_gate(self, gate: str) -> list[Label]:
        return [r for r in self.rows.values() if r.gate == gate]


def read_labels(path: Path | str, seed: int) -> Labels:
    """Read and check ``path`` for the run of ``seed``.

    Raises:
        LabelsError: naming the file and line (see the module).

    Example:
        >>> import tempfile, os
        >>> d = tempfile.mkdtemp(); p = os.path.join(d, "l.csv")
        >>> _ = open(p, "w").write("seed,gate,unit,question,label\\n0,g,u1,Is it?,yes\\n0,g,u1,Is it?,no\\n")
        >>> read_labels(p, 0)
        Traceback (most recent call last):
        ...
        t2i_fairness.audit.labels.LabelsError: ...l.csv:3: unit 'u1' is labelled twice for g (first on line 2)
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise LabelsError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    reader = csv.DictReader(text.splitlines())
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise LabelsError(f"{path}:1: missing column(s) {missing}; a label file has {', '.join(COLUMNS)} "
                          "(the CSV the labelling page of `t2i-fairness audit` saves)")
    rows: dict[str, Label] = {}
    for line, row in enumerate(reader, start=2):
        where = f"{path}:{line}"
        answer = (row["label"] or "").strip().lower()
        if answer not in ANSWERS:
            raise LabelsError(f"{where}: label {row['label']!r} is not yes, no or skip")
        try:
            row_seed = int(row["seed"])
        except (TypeError, ValueError):
            raise LabelsError(f"{where}: seed {row['seed']!r} is not an integer") from None
        if row_seed != int(seed):
            raise LabelsError(f"{where}: the label file is from a run of seed {row_seed}, this run's seed is {seed} "
                              "(--t2i-seed): its images are not this run's")
        unit, key = row["unit"], (row["gate"], row["unit"])
        if key in rows:
            raise LabelsError(f"{where}: unit {unit!r} is labelled twice for {row['gate']} (first on line "
                              f"{rows[key].line})")
        rows[key] = Label(row["gate"], unit, row["question"], ANSWERS[answer], line)
    return Labels(path, int(seed), rows)


def labels_for(labels: Labels, gate: str, share: JudgedShare) -> list[tuple[int, int]]:
    """``[(index of the unit in share.units, truth)]``: the gate's labelled units (skips dropped).

    Raises:
        LabelsError: a label of this gate on a unit it did not judge, or with another question (file and line).
    """
    index = {u.unit: i for i, u in enumerate(share.units)}
    out = []
    for row in labels.of_gate(gate):
        i = index.get(row.unit)
        where = f"{labels.path}:{row.line}"
        if i is None:
            raise LabelsError(f"{where}: unit {row.unit!r} is not an image {gate} judged in this run (another "
                              "model, settings or run?)")
        if row.question != share.units[i].question:
            raise LabelsError(f"{where}: question {row.question!r} is not the one the scorer was asked of "
                              f"{row.unit!r}: {share.units[i].question!r}")
        if row.truth is not None:
            out.append((i, row.truth))
    return out
