"""Decomposed-DIG's options: precomputed masks, the class-exclusion limit of segmentation failures, and the
two points where the fork's code departs from the paper's text (minimum background patches, unsegmented
generated images in BG-only)."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import partial
from pathlib import Path

from t2i_fairness.errors import OptionError
from t2i_fairness.families.decomposed.limits import (
    FORK_MIN_BG_PATCHES,
    PAPER_FAILURE_LIMIT_TEXT,
    UNSEGMENTED_CHOICES,
    parse_failure_limit,
)
from t2i_fairness.spine.options import (Option, Values, derived, folder, option_fields, options_of, positive,
                                        resolve_fields)

# The tiny segmenter's random detector finds no box in about half of the images by design (see
# t2i_fairness.models.segmenter), so the paper's limit would drop every class of the smoke run.
SMOKE_FAILURE_LIMIT = "0.6"
PAPER_FAILURE_LIMIT = PAPER_FAILURE_LIMIT_TEXT  # App. C.2.1: "over 100 segmentation failures out of 1020 images"
LIMIT_FLAG = "--t2i-segmentation-failure-limit"


def _failure_limit(v: Values, flag: str) -> Fraction:
    try:
        return parse_failure_limit(str(v(flag)).strip(), "")
    except ValueError as exc:
        raise OptionError(flag, str(exc)) from None


@dataclass(frozen=True)
@option_fields
class DecomposedOptions:
    """The family's options of a run: one field per option; defaults are an empty command line's."""

    masks: Path | None = Option(
        "--t2i-masks", "Decomposed-DIG: precomputed object masks instead of LangSAM: PNGs named "
        "reference/<image path relative to the reference folder, no suffix>.png and "
        "generated/<prompt>/<index>.png; nonzero pixels are object", metavar="DIR",
        check=partial(folder, noun="directory"))
    failure_limit: Fraction = Option(
        LIMIT_FLAG, "Decomposed-DIG: exclude an object class with more segmentation failures than this among its "
        "real images: FAILURES/IMAGES (the paper's 100/1020: over 100 of 1,020, "
        "proportional for other sizes) or a rate such as 0.1; the smoke preset's random segmenter misses about "
        "half of the objects", smoke=SMOKE_FAILURE_LIMIT, paper=PAPER_FAILURE_LIMIT, metavar="F/N|RATE",
        check=_failure_limit)
    # where the limit came from and the limit as given, both named in the summary
    limit_source: str = derived(lambda v: LIMIT_FLAG if v.given(LIMIT_FLAG) else f"{v.preset} preset")
    limit_text: str = derived(lambda v: str(v(LIMIT_FLAG)).strip())
    bg_min_patches: int = Option(
        "--t2i-bg-min-patches", "Decomposed-DIG: background patches an image needs for a BG-only feature "
        f"(default 1, the paper: any patch without an object pixel is background; {FORK_MIN_BG_PATCHES} reproduces "
        "the fork's code, written there as patches_considered > 25 with the CLS token counted); real images "
        "below it leave the BG-only manifold, generated ones are BG-only misses", default=1, type=int, metavar="N",
        check=positive)
    bg_unsegmented: str = Option(
        "--t2i-bg-unsegmented", "Decomposed-DIG: a generated image without an object segmentation in BG-only: "
        "'whole' (default, the paper Sec. 3.3: included in its entirety) or 'miss' (the fork's code)",
        default="whole", choices=UNSEGMENTED_CHOICES)


OPTIONS = options_of(DecomposedOptions)


def resolve(v: Values, core) -> DecomposedOptions:
    return DecomposedOptions(**resolve_fields(DecomposedOptions, v))
