"""Confidence intervals that cover, one family per kind of indicator (seeded, vectorised, deterministic).

A gate speaks about the value an indicator takes at the run's sample size on a fresh draw of its random units
(new generated images; sampled prompts too where prompts are drawn), everything else held fixed. Each estimand
returns an :class:`Interval`: the estimate, a two-sided interval, and what the gate's one-sided test at any level
needs (standard error and degrees of freedom, a share's effective size, a law-free side).

Modules: ``value`` (the :class:`Interval`), ``tails`` (exact binomial and normal tails and limits), ``lawfree``
(Hoeffding, Maurer-Pontil), ``betting`` (hedged capital: fixed-n limits and confidence sequences), ``resampling``
(bootstrap, jackknife, BCa), and the estimands: ``shares`` (coverage, precision), ``percentile`` (a mean of low
percentiles), ``clusters`` (sampled and fixed prompts).
Every estimand takes ``method``, ``confidence`` (two-sided, in (0, 1)), ``n_resamples`` and ``seed`` (equal
arguments give equal intervals) and raises ``ValueError`` naming a bad argument. Which method each indicator
uses, and its measured coverage: ``docs/calibration.md``.
"""

from t2i_fairness.metrics.intervals.betting import (NARROW_TRUNCATION, TRUNCATION, TUNED_LEVEL, betting_limits,
                                                    betting_p_value, betting_sequence_limits)
from t2i_fairness.metrics.intervals.clusters import (CLUSTER_METHODS, CLUSTER_STATISTIC_METHODS, STRATIFIED_METHODS,
                                                     cluster_bootstrap_interval, cluster_mean_interval,
                                                     cluster_share_runs, stratified_mean_interval)
from t2i_fairness.metrics.intervals.lawfree import BoundedUnits, betting_limit, bounded_mean_limit, bounded_mean_tail
from t2i_fairness.metrics.intervals.percentile import (PERCENTILE_METHODS, PercentileMean, _loo_percentile_variance,
                                                       normal_percentile_mean, normal_percentile_variance,
                                                       percentile_mean_interval, percentile_variance)
from t2i_fairness.metrics.intervals.resampling import _score, jackknife_se_df
from t2i_fairness.metrics.intervals.shares import (COVERAGE_METHODS, PRECISION_METHODS, _coverage_jackknife,
                                                   coverage_interval, precision_interval)
from t2i_fairness.metrics.intervals.tails import (P_FLOOR, _t_density_at_0, agresti_coull, invert_limit, normal_tail,
                                                  share_effective_size, share_limit, share_limits, share_power,
                                                  share_tail, share_trials, upper_quantile, upper_quantiles)
from t2i_fairness.metrics.intervals.value import BASES, Interval, bound_cannot_fail, floor_to_units

__all__ = ["BASES", "BoundedUnits", "CLUSTER_METHODS", "CLUSTER_STATISTIC_METHODS", "COVERAGE_METHODS", "Interval",
           "NARROW_TRUNCATION", "PERCENTILE_METHODS", "PRECISION_METHODS", "P_FLOOR", "PercentileMean",
           "STRATIFIED_METHODS", "TRUNCATION", "TUNED_LEVEL", "agresti_coull", "betting_limit", "betting_limits",
           "betting_p_value", "betting_sequence_limits", "bound_cannot_fail", "bounded_mean_limit", "bounded_mean_tail",
           "cluster_bootstrap_interval", "cluster_mean_interval", "cluster_share_runs", "coverage_interval",
           "floor_to_units", "invert_limit", "jackknife_se_df", "normal_percentile_mean", "normal_percentile_variance",
           "normal_tail", "percentile_mean_interval", "percentile_variance", "precision_interval",
           "share_effective_size", "share_limit", "share_limits", "share_power", "share_tail", "share_trials",
           "stratified_mean_interval", "upper_quantile", "upper_quantiles"]
