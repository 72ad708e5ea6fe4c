"""The paper families of indicators, registered here: one line per family.

Each entry is a :class:`~t2i_fairness.families.base.Family` record from the family's own folder
(``families/<name>/__init__.py``); the plugin reads this list for the families' options, their study
fixtures, the parametrization of their gate tests, their header lines and their report labels.
Families never import one another; what two of them share (GeoDE prompts, reference sets) lives in
:mod:`t2i_fairness.references` and :mod:`t2i_fairness.vocab`.
"""

from __future__ import annotations

import importlib

from t2i_fairness.families.base import Family, null_shares
from t2i_fairness.gating.sequential.rules import declare_futility_miss

REGISTERED: tuple[str, ...] = (  # one line per family, in report order
    "dig_in",
    "decomposed",
    "word_influence",
    "cis",
    "indic_tti",
)

FAMILIES: tuple[Family, ...] = tuple(importlib.import_module(f"{__name__}.{name}").FAMILY for name in REGISTERED)

for _family in FAMILIES:  # the sequential rules learn the futility miss of a family's own kinds
    declare_futility_miss(dict(_family.futility_miss), _family.name)


def __getattr__(name: str):
    if name == "NULL_SHARES":  # (family, kind) -> {(N, batch): share}: every family's ``Family.null_shares``, read once
        table = {(f.name, kind): dict(rows) for f in FAMILIES if f.null_shares for kind, rows in null_shares(f).table.items()}
        globals()["NULL_SHARES"] = table
        return table
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["FAMILIES", "Family", "NULL_SHARES", "family_of_module", "null_share", "value_ranges"]


def null_share(family: str, kind: str, batch: int, size: int | None = None) -> tuple[float, tuple[int, int] | None]:
    """The null-model image share of a gate of ``family`` (:func:`~t2i_fairness.gating.sequential.plan.null_share`
    over the family's table) and the bench's ``(N, batch)`` it was measured at.

    Example:
        >>> null_share("decomposed", "share", 8)         # not measured: counted at N
        (1.0, None)
    """
    from t2i_fairness.gating.sequential.plan import null_share as share

    owner = next((f for f in FAMILIES if f.name == family), None)
    return share(None if owner is None else null_shares(owner), kind, batch, size)


def value_ranges(families=None) -> dict:
    """Test function -> ``(kind, (lowest, highest))``: the values each gate test measures, from its study's
    indicator method (``test_<method>``; :func:`~t2i_fairness.families.base.indicator`): its declared range, or
    its kind's (:data:`~t2i_fairness.gating.ranges.KIND_RANGES`).

    Example:
        >>> r = value_ranges()
        >>> r["test_region_coverage"], r["test_dwl"], r["test_clgc_vs_english"]
        (('coverage', (0.0, 1.0)), ('score', (0.0, 2.0)), ('ratio', (None, None)))
    """
    from t2i_fairness.families.base import indicator_methods
    from t2i_fairness.gating.ranges import KIND_RANGES

    out = {}
    for family in FAMILIES if families is None else families:
        if family.study_type is None:
            continue
        for name, method in indicator_methods(family.study_type()).items():
            kind = method.indicator_kind
            out[f"test_{name}"] = (kind, method.indicator_range or KIND_RANGES[kind])
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
