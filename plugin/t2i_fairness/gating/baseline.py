"""Candidate versus baseline: the paired comparison of one gate (``--t2i-baseline-model``).

Both models saw the same prompts and image indices, so unit ``i`` is the same prompt and seed in
both: the same resampled indices feed both statistics and the interval is on their difference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from t2i_fairness.gating.verdicts import Measurement


@dataclass
class BaselineMeasurement:
    """What the baseline run of a gate left for the candidate's comparison (same process)."""

    measurement: Measurement
    resample: Callable[[Any], float] | None = None
    units: int | None = None
    strata: Any = None


def compare_with_baseline(m: Measurement, baseline: BaselineMeasurement | None, *, model: str, allowed: float,
                          mode: str, resample=None, units: int | None = None, strata=None,
                          n_resamples: int = 0, confidence: float = 0.95, seed: int = 0) -> dict:
    """``candidate >= baseline - allowed`` (``<=`` plus ``allowed`` for max gates), with a paired bootstrap interval.

    Returns a JSON-able dict: ``model``, ``value`` (the baseline's), ``delta``, ``interval``,
    ``allowed``, ``failed`` and a one-line ``message``.
    """
    if baseline is None:
        return {"message": "baseline not measured in this process (run with -n 0 or --dist loadgroup)", "failed": False}
    b = baseline.measurement
    delta = m.value - b.value
    interval = None
    if resample is not None and baseline.resample is not None and units and units == baseline.units and n_resamples > 0:
        from t2i_fairness.metrics.stats import index_bootstrap

        b_resample = baseline.resample
        interval = index_bootstrap(lambda idx: resample(idx) - b_resample(idx), int(units), strata=strata,
                                   n_resamples=n_resamples, confidence=confidence, seed=seed)
    sign = 1.0 if m.direction == "min" else -1.0  # a positive "worse" means the candidate regressed
    if mode == "significant" and interval is not None:
        worse = -sign * (interval[1] if sign > 0 else interval[0])
    else:
        worse = -sign * delta
    failed = worse > allowed
    text = f"[{interval[0]:+.4f}, {interval[1]:+.4f}]" if interval else "(no interval)"
    message = (f"vs baseline {model}: {m.value:.4f} - {b.value:.4f} = {delta:+.4f} {text}, "
               f"allowed {'drop' if sign > 0 else 'rise'} {allowed:g}" + (" FAILED" if failed else ""))
    return {"model": model, "value": b.value, "delta": delta, "interval": list(interval) if interval else None,
            "allowed": allowed, "failed": failed, "message": message}
