"""Canaries: generator wrappers that plant a known regression in one slice of any generator.

A run against a canary says which gates caught the planted regression and which stayed green:

==========================  ===========  ===========================================================
canary (``NAME:SLICE``)     slice        what the wrapped model does
==========================  ===========  ===========================================================
``collapse_region:R``       region R     every prompt of R returns one identical image (mode collapse)
``degrade_region:R[:S]``    region R     R's images blurred, noised and desaturated by strength S
``drop_component:C``        component C  CIS prompts naming C (and another) are generated without C
``drop_position:Q[:P]``      position Q   the component named at position Q (first, last or a number)
                                         left out of a share P (default 0.5) of the images of CIS
                                         prompts of two or more components: an order effect
``answer_language:L``       languages    every language's prompt answered with language L's text
                            other than L  of the same prompt id (IndicTTI)
``shift_group_share:W[:P]`` word W       prompts containing W get, per image with probability p, an
                                         image of ``a photo of a {group}`` (P: ``GROUP=p``)
==========================  ===========  ===========================================================

Outside its slice a canary returns the inner generator's images byte for byte, under its own
fingerprint. Build one with :func:`make_canary` or wrap the plugin's lazy source with :func:`wrap_source`.
"""

from __future__ import annotations

from typing import Mapping

from t2i_fairness.families import FAMILIES
from t2i_fairness.families.cis.canaries import DropComponent, DropPosition
from t2i_fairness.families.dig_in.canaries import CollapseRegion, DegradeRegion
from t2i_fairness.families.indic_tti.canaries import AnswerLanguage
from t2i_fairness.families.word_influence.canaries import ShiftGroupShare
from t2i_fairness.generators import canary as _machinery
from t2i_fairness.generators.canary import (
    CANARY_VERSION,
    Canary,
    CanaryInfo,
    CanarySlice,
    CanarySpec,
    SliceKind,
    canary_table,
)

__all__ = [
    "CANARIES",
    "CANARY_VERSION",
    "AnswerLanguage",
    "Canary",
    "CanaryInfo",
    "CanarySlice",
    "CanarySpec",
    "CollapseRegion",
    "DegradeRegion",
    "DropComponent",
    "DropPosition",
    "ShiftGroupShare",
    "SliceKind",
    "catch_report",
    "make_canary",
    "parse_canary",
    "slice_of",
    "wrap_source",
]

#: Every registered family's canaries, by name, in registration order.
CANARIES: Mapping[str, CanaryInfo] = canary_table(FAMILIES)

#: The slice kinds the registered canaries use.
SLICE_KINDS: tuple[str, ...] = tuple(dict.fromkeys(i.slice_kind for i in CANARIES.values()))


def parse_canary(spec: str, *, option: str = "--t2i-canary") -> CanarySpec:
    """Parse and check a ``NAME:SLICE[:PARAM]`` canary string against the registered canaries.

    Example:
        >>> str(parse_canary("degrade_region:Nigeria:0.8"))
        'degrade_region:africa:0.8'
    """
    return _machinery.parse_canary(spec, canaries=CANARIES, option=option)


def make_canary(spec: str | CanarySpec, inner, *, multilingual=None, option: str = "--t2i-canary") -> Canary:
    """Wrap ``inner`` in the canary a ``NAME:SLICE[:PARAM]`` string names.

    Args:
        multilingual: the run's IndicTTI prompt set; required by ``answer_language``.

    Example:
        >>> from t2i_fairness.generators.procedural import ProceduralGenerator
        >>> make_canary("shift_group_share:doctor:male=0.3", ProceduralGenerator()).slice.label
        'word doctor'
    """
    return _machinery.make_canary(spec, inner, canaries=CANARIES, multilingual=multilingual, option=option)


def wrap_source(source, spec: str | CanarySpec, *, multilingual=None, option: str = "--t2i-canary"):
    """The plugin's lazy generator source with a canary around its generator (the model is not loaded)."""
    return _machinery.wrap_source(source, spec, canaries=CANARIES, multilingual=multilingual, option=option)


def slice_of(spec: str | CanarySpec) -> CanarySlice:
    """The slice a canary string targets, without a generator (for summaries)."""
    return _machinery.slice_of(spec, canaries=CANARIES)


def catch_report(spec: str | CanarySpec, records) -> tuple[list[str], dict]:
    """Which gates caught a canary: ``(summary lines, counts)``; failing gates of other slices are false alarms.

    Example:
        >>> lines, counts = catch_report("collapse_region:africa", [
        ...     {"gate": "test_region_coverage[s-object_in_region-africa]", "status": "fail"},
        ...     {"gate": "test_region_coverage[s-object_in_region-europe]", "status": "pass"}])
        >>> counts["slice_caught"], counts["slice_gates"], counts["false_alarms"]
        (1, 1, 0)
    """
    return _machinery.catch_report(spec, records, canaries=CANARIES)
