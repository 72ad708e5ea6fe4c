"""Labels answered from the procedural truth: the audit of a ``--t2i-model procedural`` run, without a person.

Each procedural image carries what it shows (:func:`t2i_fairness.base.truth.truth_of`, through the cache); a judged
unit asks whether its image shows one concept (its id ends in ``#<concept>``, the CIS form), so the truth answers
it. ``t2i-fairness audit RUN --from-truth`` writes these answers as the ``labels.csv`` ``--t2i-audit`` reads: the
audit of a world whose truth is known, to check that audited gates hold their level whatever the scorer gets wrong.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from t2i_fairness.audit.labels import COLUMNS
from t2i_fairness.audit.sample import Drawn

__all__ = ["LABELS", "truth_answer", "write_truth_labels"]

LABELS = "labels.csv"


def truth_answer(drawn: Drawn, truths: dict) -> str:
    """``yes`` or ``no``: does the unit's image truly show the unit's concept? ``truths`` caches each image's
    concepts by path.

    Raises:
        ValueError: the image cannot be read, carries no truth (not a procedural image), or the unit names no
            concept (naming the unit and the file).
    """
    from PIL import Image

    from t2i_fairness.base.truth import truth_of

    unit = drawn.unit
    if "#" not in unit.unit:
        raise ValueError(f"unit {unit.unit!r} of {drawn.gate} names no concept (`<image>#<concept>`): the truth "
                         "cannot answer its question")
    if unit.image not in truths:
        try:
            with Image.open(unit.image) as im:
                im.load()
                truth = truth_of(im)
        except OSError as exc:
            raise ValueError(f"{unit.image}: the image of unit {unit.unit!r} cannot be read ({exc}); run the audit "
                             "from the folder the run ran in (its cache paths are relative to it)") from None
        if truth is None:
            raise ValueError(f"{unit.image}: the image of unit {unit.unit!r} carries no truth: --from-truth labels "
                             "only a --t2i-model procedural run (its images carry what they show)")
        truths[unit.image] = frozenset(truth["concepts"])
    return "yes" if unit.unit.rsplit("#", 1)[1] in truths[unit.image] else "no"


def write_truth_labels(drawn: list[Drawn], seed: int, out: Path | str) -> Path:
    """Write ``out/labels.csv``: every drawn unit answered from its image's truth (the columns
    :func:`t2i_fairness.audit.labels.read_labels` reads). Raises ``ValueError`` as :func:`truth_answer`."""
    from t2i_fairness.base.files import atomic_write_bytes

    truths: dict = {}
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(COLUMNS)
    for d in drawn:
        writer.writerow([int(seed), d.gate, d.unit.unit, d.unit.question, truth_answer(d, truths)])
    return atomic_write_bytes(Path(out) / LABELS, buf.getvalue().encode("utf-8"), skip_if_same=True, fsync=False)
