"""The paper families of indicators, registered here: one line per family.

Each entry is a :class:`~t2i_fairness.families.base.Family` record from the family's own folder
(``families/<name>/__init__.py``); the plugin reads this list for the families' options, their study
fixtures, the parametrization of their gate tests, their header lines and their report labels.
Families never import one another; what two of them share (GeoDE prompts, reference sets) lives in
:mod:`t2i_fairness.references` and :mod:`t2i_fairness.vocab`.
"""

from __future__ import annotations

import importlib

from t2i_fairness.families.base import Family

REGISTERED: tuple[str, ...] = (  # one line per family, in report order
    "dig_in",
    "decomposed",
    "word_influence",
    "cis",
    "indic_tti",
)

FAMILIES: tuple[Family, ...] = tuple(importlib.import_module(f"{__name__}.{name}").FAMILY for name in REGISTERED)

__all__ = ["FAMILIES", "Family", "family_of_module", "value_ranges"]


def value_ranges(families=None) -> dict:
    """Test function -> ``(kind, (lowest, highest))``: the values each known gate test measures, from its
    family's kind (``Family.sequential``, ranges in :data:`~t2i_fairness.gating.ranges.KIND_RANGES`) or its
    own range (``Family.ranges``).

    Example:
        >>> r = value_ranges()
        >>> r["test_region_coverage"], r["test_dwl"], r["test_clgc_vs_english"]
        (('coverage', (0.0, 1.0)), ('score', (0.0, 2.0)), ('ratio', (None, None)))
    """
    from t2i_fairness.gating.ranges import KIND_RANGES

    out = {}
    for family in FAMILIES if families is None else families:
        for test, kind in family.sequential.items():
            out[test] = (kind, family.ranges.get(test, KIND_RANGES[kind]))
        for test, rng in family.ranges.items():
            out.setdefault(test, ("own", rng))
    return out


def family_of_module(module: str) -> Family | None:
    """The family whose gate tests live in ``module`` (a dotted name or a file stem), or ``None``.

    Example:
        >>> family_of_module("fairness_tests.test_cis").name
        'cis'
        >>> family_of_module("test_something_else") is None
        True
    """
    stem = module.rsplit(".", 1)[-1]
    for family in FAMILIES:
        if stem in family.suite_modules:
            return family
    return None
