"""Canaries: generator wrappers that plant a known regression in one slice of any generator.

A canary wraps the model under test and changes exactly one slice of its output, so a run
against it says which gates caught the planted regression and which stayed green:

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

Outside its slice a canary returns the inner generator's images byte for byte, and its
fingerprint keeps its images apart in the cache (docs/decisions.md). Build one with
:func:`make_canary` (``make_canary("collapse_region:africa", generator)``) or wrap the plugin's
lazy source with :func:`wrap_source`. :data:`CANARIES` is every registered family's; the
functions here are :mod:`t2i_fairness.generators.canary`'s, bound to it.
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

    Raises:
        ValueError: no ``:``, an unknown NAME (listing the names), a bad SLICE or PARAM.

    Example:
        >>> str(parse_canary("degrade_region:Nigeria:0.8"))
        'degrade_region:africa:0.8'
        >>> parse_canary("melt_region:africa")
        Traceback (most recent call last):
        ...
        ValueError: --t2i-canary 'melt_region:africa': unknown canary 'melt_region'; choose from collapse_region, degrade_region, shift_group_share, drop_component, drop_position, answer_language
    """
    return _machinery.parse_canary(spec, canaries=CANARIES, option=option)


def make_canary(spec: str | CanarySpec, inner, *, multilingual=None, option: str = "--t2i-canary") -> Canary:
    """Wrap ``inner`` in the canary a ``NAME:SLICE[:PARAM]`` string names.

    Args:
        multilingual: the run's IndicTTI prompt set; required by ``answer_language``.

    Raises:
        ValueError: as :func:`parse_canary`, or ``answer_language`` without its language's texts.
        TypeError: ``inner`` is not a generator.

    Example:
        >>> from t2i_fairness.generators.procedural import ProceduralGenerator
        >>> canary = make_canary("shift_group_share:doctor:male=0.3", ProceduralGenerator())
        >>> type(canary).__name__, canary.slice.label, canary.describe()
        ('ShiftGroupShare', 'word doctor', "shift_group_share:doctor:male=0.3: prompts containing 'doctor' get 'a photo of a male' images with probability 0.3")
    """
    return _machinery.make_canary(spec, inner, canaries=CANARIES, multilingual=multilingual, option=option)


def wrap_source(source, spec: str | CanarySpec, *, multilingual=None, option: str = "--t2i-canary"):
    """The plugin's lazy generator source with a canary around its generator.

    The fingerprint comes from the inner source's alone (a warm cache never loads the model); errors
    in ``spec`` are raised here, before anything is generated.

    Example:
        >>> from t2i_fairness.spine.generation import derive_seed
        >>> from t2i_fairness.generators import GenerationSettings, resolve_generator
        >>> source = resolve_generator("procedural", GenerationSettings(), "cpu", derive_seed)
        >>> wrapped = wrap_source(source, "degrade_region:Egypt:0.3")
        >>> wrapped.fingerprint == source.fingerprint + "+canary:degrade_region:africa:0.3:v1", wrapped.loaded
        (True, False)
    """
    return _machinery.wrap_source(source, spec, canaries=CANARIES, multilingual=multilingual, option=option)


def slice_of(spec: str | CanarySpec) -> CanarySlice:
    """The slice a canary string targets, without a generator (for summaries).

    Example:
        >>> slice_of("collapse_region:africa").gate_role("test_region_coverage[synthetic-object_in_region-africa]")
        'slice'
    """
    return _machinery.slice_of(spec, canaries=CANARIES)


def catch_report(spec: str | CanarySpec, records) -> tuple[list[str], dict]:
    """Which gates caught a canary: ``(summary lines, counts)``.

    A gate caught it when its verdict is ``fail`` (or a blocking ``inconclusive``); gates of other
    slices that fail are false alarms; ``aggregate`` gates are listed, not counted.

    Example:
        >>> lines, counts = catch_report("collapse_region:africa", [
        ...     {"gate": "test_region_coverage[s-object_in_region-africa]", "status": "fail"},
        ...     {"gate": "test_region_coverage[s-object_in_region-europe]", "status": "pass"}])
        >>> counts["slice_caught"], counts["slice_gates"], counts["false_alarms"]
        (1, 1, 0)
    """
    return _machinery.catch_report(spec, records, canaries=CANARIES)
