"""Power in words: would this gate see the miss it exists for? (docs/decisions.md, "Power")

Each gate kind has a minimum meaningful miss (:data:`MEANINGFUL_MISS`); a gate's power is the
probability its own test, at the run's level, fails a model missing the bound by that much at the
gate's size. Below :data:`UNDERPOWERED` every output says so, with the images 80% power would need.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["MEANINGFUL_MISS", "TARGET", "UNDERPOWERED", "power_record", "power_words", "hypothesis_power_record"]

#: gate kind (``Family.sequential``) -> the smallest miss, in the indicator's units, a release must catch
MEANINGFUL_MISS: dict[str, float] = {
    "share": 0.10,  # precision, CIS_K: a share of images
    "bounded": 0.10,
    "coverage": 0.10,  # a share of real images' balls
    "worst": 0.10,  # the worst group's share
    "spread": 0.10,  # best minus worst, template improvement, CIS drop per component: shares' differences
    "ratio": 0.10,  # worst / best, CLGC(l) / CLGC(English)
    "percentile": 0.02,  # mean over objects of the 10th-percentile CLIP cosine (DIG In consistency)
    "score": 0.05,  # IndicTTI's cosine scores (CLGC, IGC, LGC, SCWL, DWL, SCAL)
    "hoeffding": 0.10,  # word-level |influence| and the representation gap: shares' differences
}
#: a power below this is underpowered: the verdict says so in words
UNDERPOWERED = 0.5
#: the power ``images_for_80`` plans for
TARGET = 0.8


def power_record(uncertainty: Any, bound: float, direction: str, level: float, kind: str | None,
                 n: int) -> dict | None:
    """The gate's power against its kind's meaningful miss at ``level``, as a record field, or ``None``.

    Returns:
        ``{"effect", "power", "level", "underpowered", "n", "images_for_80", "factor_for_80"}``;
        ``factor_for_80`` multiplies the images per prompt (``None`` beyond 10,000 times).

    Example:
        >>> import numpy as np
        >>> from t2i_fairness.metrics.intervals import precision_interval
        >>> iv = precision_interval(np.r_[np.ones(57, bool), np.zeros(3, bool)])       # 60 images
        >>> r = power_record(iv, 0.9, "min", 0.05 / 475, "share", 60)
        >>> round(r["power"], 3), r["underpowered"], r["images_for_80"]
        (0.077, True, 241)
    """
    from t2i_fairness.metrics.evidence import images_for_power

    effect = MEANINGFUL_MISS.get(kind or "")
    if effect is None or uncertainty is None or not hasattr(uncertainty, "power") or bound is None:
        return None
    if not (math.isfinite(bound) and 0 < level < 1):
        return None
    try:
        power = float(uncertainty.power(bound, direction, effect, level))
        factor = images_for_power(uncertainty, bound, direction, effect, level, power=TARGET)
    except (ValueError, ZeroDivisionError, OverflowError):
        return None
    out = {"effect": effect, "power": power, "level": float(level), "underpowered": power < UNDERPOWERED,
           "n": int(n), "factor_for_80": factor,
           "images_for_80": None if factor is None else int(math.ceil(n * factor))}
    floor = float(getattr(uncertainty, "p_floor", 0.0) or 0.0)
    if floor > level:  # more images per prompt cannot help: the prompts bound the p-value
        out.update(p_floor=floor, units=int(uncertainty.n_units))
    elif hasattr(uncertainty, "reach"):  # a law-free test over prompts: misses below its reach are out of sight
        reach = float(uncertainty.reach(bound, direction, level))
        if reach >= effect:
            out.update(reach=reach, units=int(uncertainty.n_units))
    return out


def hypothesis_power_record(power: dict | None, n: int) -> dict | None:
    """A hypothesis-test gate's power record (the same fields as :func:`power_record`'s) from the power its
    test states against its own effect (:class:`~t2i_fairness.metrics.decisions.HypothesisTest`), or ``None``.

    Example:
        >>> r = hypothesis_power_record({"power": 0.0, "effect": 0.2, "level": 1e-4, "floor": 0.25, "units": 8}, 64)
        >>> r["underpowered"], r["p_floor"], r["units"]
        (True, 0.25, 8)
    """
    if not power or power.get("power") is None:
        return None
    level = float(power["level"])
    out = {"effect": float(power["effect"]), "power": float(power["power"]), "level": level,
           "underpowered": float(power["power"]) < UNDERPOWERED, "n": int(n), "factor_for_80": None,
           "images_for_80": None, "miss": power.get("miss")}
    floor = power.get("floor")
    if floor is not None and float(floor) > level:  # the prompts bound the p-value: more images cannot help
        out.update(p_floor=float(floor), units=int(power["units"]))
    return out


def power_words(record: dict | None, status: str) -> str | None:
    """The words an underpowered verdict carries, or ``None``.

    Example:
        >>> power_words({"effect": 0.1, "power": 0.031, "underpowered": True, "factor_for_80": 4.02}, "pass")
        'passed, underpowered: would catch a 0.1 miss 3.1% of the time (80% needs about 4.02x its images per prompt)'
    """
    if not record or not record.get("underpowered") or status not in ("pass", "inconclusive"):
        return None
    verdict = "passed" if status == "pass" else "inconclusive"
    factor = record.get("factor_for_80")
    plan = (f"80% needs about {factor:.3g}x its images per prompt" if factor is not None
            else "80% needs more prompts or images per prompt" if record.get("miss")
            else "no size up to 10,000x its images reaches 80%")
    if record.get("p_floor"):
        assumption = "" if record.get("miss") else " without assuming normal prompt values"
        plan = (f"cannot fail at this level: {record['units']} prompts give no p below {record['p_floor']:.2g}"
                f"{assumption}; it needs more prompts")
    elif record.get("reach"):
        plan = (f"a test valid for any law of its {record['units']} prompts fails no miss below "
                f"{record['reach']:.2g} at this level; it needs more prompts")
    miss = record.get("miss") or f"{record['effect']:g} miss"
    return (f"{verdict}, underpowered: would catch a {miss} {_pct(record['power'])} of the time "
            f"({plan})")


def _pct(p: float) -> str:
    if p < 0.001:
        return "<0.1%"
    return f"{100 * p:.1f}%" if p < 0.1 else f"{100 * p:.0f}%"
