"""Decomposed-DIG's options: precomputed masks, and the class-exclusion limit of segmentation failures."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from t2i_fairness.errors import OptionError
from t2i_fairness.spine.options import Option, Values, finite

# The tiny segmenter's random detector finds no box in about half of the images by design (see
# t2i_fairness.models.segmenter), so the paper's 10 % class limit would drop every class of the smoke run.
SMOKE_FAILURE_LIMIT = 0.6
PAPER_FAILURE_LIMIT = 0.10  # App. C.2.1: classes with > 100 of 1020 failures were dropped

OPTIONS = (
    Option("--t2i-masks", "Decomposed-DIG: precomputed object masks instead of LangSAM: PNGs named "
           "reference/<image path relative to the reference folder, no suffix>.png and "
           "generated/<prompt>/<index>.png; nonzero pixels are object", metavar="DIR"),
    Option("--t2i-segmentation-failure-limit", "Decomposed-DIG: exclude an object class whose real images fail "
           "segmentation more often than this fraction (paper: 0.10; the smoke preset's random segmenter misses "
           "about half of the objects)", smoke=SMOKE_FAILURE_LIMIT, paper=PAPER_FAILURE_LIMIT, type=float,
           metavar="FRACTION"),
)


@dataclass(frozen=True)
class DecomposedOptions:
    masks: Path | None = None
    failure_limit: float = PAPER_FAILURE_LIMIT
    limit_source: str = "paper"  # where the limit came from, named in the summary


def resolve(v: Values, core) -> DecomposedOptions:
    raw = v.raw("--t2i-masks")
    masks = None
    if raw is not None:
        masks = Path(raw).expanduser()
        masks = masks if masks.is_absolute() else v.invocation_dir / masks
        if not masks.is_dir():
            raise OptionError("--t2i-masks", f"{raw!r}: not a directory")
    limit = finite(v, "--t2i-segmentation-failure-limit", 0.0, 1.0)
    source = "--t2i-segmentation-failure-limit" if v.given("--t2i-segmentation-failure-limit") else f"{v.preset} preset"
    return DecomposedOptions(masks, float(limit), source)
