"""Decomposed-DIG's options: precomputed masks, the class-exclusion limit of segmentation failures, and the
two points where the fork's code departs from the paper's text (minimum background patches, unsegmented
generated images in BG-only)."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from t2i_fairness.errors import OptionError
from t2i_fairness.families.decomposed.limits import (
    DEFAULT_FAILURE_LIMIT,
    FORK_MIN_BG_PATCHES,
    PAPER_FAILURE_LIMIT_TEXT,
    UNSEGMENTED_CHOICES,
    parse_failure_limit,
)
from t2i_fairness.spine.options import Option, Values, positive

# The tiny segmenter's random detector finds no box in about half of the images by design (see
# t2i_fairness.models.segmenter), so the paper's limit would drop every class of the smoke run.
SMOKE_FAILURE_LIMIT = "0.6"
PAPER_FAILURE_LIMIT = PAPER_FAILURE_LIMIT_TEXT  # App. C.2.1: "over 100 segmentation failures out of 1020 images"

OPTIONS = (
    Option("--t2i-masks", "Decomposed-DIG: precomputed object masks instead of LangSAM: PNGs named "
           "reference/<image path relative to the reference folder, no suffix>.png and "
           "generated/<prompt>/<index>.png; nonzero pixels are object", metavar="DIR"),
    Option("--t2i-segmentation-failure-limit", "Decomposed-DIG: exclude an object class with more segmentation "
           "failures than this among its real images: FAILURES/IMAGES (the paper's 100/1020: over 100 of 1,020, "
           "proportional for other sizes) or a rate such as 0.1; the smoke preset's random segmenter misses about "
           "half of the objects", smoke=SMOKE_FAILURE_LIMIT, paper=PAPER_FAILURE_LIMIT, metavar="F/N|RATE"),
    Option("--t2i-bg-min-patches", "Decomposed-DIG: background patches an image needs for a BG-only feature "
           f"(default 1, the paper: any patch without an object pixel is background; {FORK_MIN_BG_PATCHES} reproduces "
           "the fork's code, written there as patches_considered > 25 with the CLS token counted); real images "
           "below it leave the BG-only manifold, generated ones are BG-only misses", default=1, type=int, metavar="N"),
    Option("--t2i-bg-unsegmented", "Decomposed-DIG: a generated image without an object segmentation in BG-only: "
           "'whole' (default, the paper Sec. 3.3: included in its entirety) or 'miss' (the fork's code)",
           default="whole", choices=UNSEGMENTED_CHOICES),
)


@dataclass(frozen=True)
class DecomposedOptions:
    masks: Path | None = None
    failure_limit: Fraction = DEFAULT_FAILURE_LIMIT
    limit_source: str = "paper"  # where the limit came from, named in the summary
    limit_text: str = PAPER_FAILURE_LIMIT_TEXT  # the limit as given
    bg_min_patches: int = 1
    bg_unsegmented: str = "whole"


def resolve(v: Values, core) -> DecomposedOptions:
    raw = v.raw("--t2i-masks")
    masks = None
    if raw is not None:
        masks = Path(raw).expanduser()
        masks = masks if masks.is_absolute() else v.invocation_dir / masks
        if not masks.is_dir():
            raise OptionError("--t2i-masks", f"{raw!r}: not a directory")
    text = str(v("--t2i-segmentation-failure-limit")).strip()
    try:
        limit = parse_failure_limit(text, "")
    except ValueError as exc:
        raise OptionError("--t2i-segmentation-failure-limit", str(exc)) from None
    source = "--t2i-segmentation-failure-limit" if v.given("--t2i-segmentation-failure-limit") else f"{v.preset} preset"
    return DecomposedOptions(masks, limit, source, text, positive(v, "--t2i-bg-min-patches"),
                             v("--t2i-bg-unsegmented"))
