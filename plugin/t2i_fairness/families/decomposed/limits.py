"""Decomposed-DIG's class-exclusion rule and the constants its options need, without numpy or torch.

The paper (App. C.2.1) excludes classes with "over 100 segmentation failures out of 1020
images"; the rule is applied exactly, in integers, and proportionally for other sizes.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

DEFAULT_FAILURE_LIMIT = Fraction(100, 1020)  # App. C.2.1: over 100 failures of 1,020 images
PAPER_FAILURE_LIMIT_TEXT = "100/1020"
FORK_MIN_BG_PATCHES = 25  # the fork's `patches_considered > 25`, the CLS token counted: >= 25 background patches
UNSEGMENTED_CHOICES = ("whole", "miss")


def parse_failure_limit(value: Any, argument: str = "limit") -> Fraction:
    """A class-exclusion limit as an exact fraction: ``"100/1020"`` or a decimal rate such as ``"0.1"``.

    Raises:
        ValueError: not a fraction or number, or outside [0, 1] (the message names ``argument``).

    Example:
        >>> parse_failure_limit("100/1020"), parse_failure_limit("0.1"), parse_failure_limit(0.6)
        (Fraction(5, 51), Fraction(1, 10), Fraction(3, 5))
    """
    if isinstance(value, Fraction):
        limit = value
    else:
        text = str(value).strip()
        try:
            if "/" in text:
                num, den = text.split("/", 1)
                limit = Fraction(int(num), int(den))
            else:
                limit = Fraction(text)
        except (ValueError, ZeroDivisionError):
            raise ValueError(f"{argument} must be FAILURES/IMAGES (e.g. 100/1020) or a rate such as 0.1, "
                             f"got {value!r}".lstrip()) from None
    if not 0 <= limit <= 1:
        raise ValueError(f"{argument} must be a failure rate in [0, 1], got {value!r}".lstrip())
    return limit


def exceeds_failure_limit(failures: int, images: int, limit: Any = DEFAULT_FAILURE_LIMIT) -> bool:
    """Whether a class with ``failures`` of ``images`` real images failing is excluded.

    With ``limit = 100/1020`` a class goes iff ``failures x 1020 > 100 x images`` (101 of 1,020
    goes; 105 of 1,080 stays); a decimal ``r`` compares ``failures > r x images`` exactly.

    Example:
        >>> [exceeds_failure_limit(f, 1020) for f in (100, 101, 102)]
        [False, True, True]
        >>> exceeds_failure_limit(102, 1020, "0.1"), exceeds_failure_limit(103, 1020, "0.1")
        (False, True)
    """
    r = parse_failure_limit(limit)
    return failures * r.denominator > r.numerator * images
