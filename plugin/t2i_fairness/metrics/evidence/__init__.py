"""Evidence for a gate whose value is more than one share: the worst of G groups, the spread or ratio of groups,
linear combinations, Fieller ratios, Hoeffding bounds, and means and ratios over bounded units by betting.

Each class is an :class:`~t2i_fairness.metrics.intervals.Interval` whose ``limit``, ``p_value``, ``power`` and
``scaled`` count what the gate really tests. Limits are exact (a share's are Clopper-Pearson's at its effective
size) and combined by MOVER (Zou & Donner 2008; MOVER-R for ratios), so they stay inside the parameter space.
A selection is counted by Bonferroni: :class:`WorstOf` tests each group at ``alpha / G``, :class:`Pairs` each
ordered pair at ``alpha / (G (G - 1))``. Modules: ``selection``, ``combination``, ``hoeffding``, ``power``, ``units``.
Why and how each is calibrated: ``docs/calibration.md``.
"""

from t2i_fairness.metrics.evidence.combination import Combination, FiellerRatio, combination, fieller_ratio, mover_limit
from t2i_fairness.metrics.evidence.hoeffding import Hoeffding, hoeffding_tail
from t2i_fairness.metrics.evidence.power import images_for_power, minimum_detectable
from t2i_fairness.metrics.evidence.selection import Pairs, WorstOf, pair_limit, pairs, worst_of
from t2i_fairness.metrics.evidence.units import UnitMean, UnitRatio, law_free_reach, unit_mean, unit_ratio

__all__ = ["Combination", "FiellerRatio", "Hoeffding", "Pairs", "UnitMean", "UnitRatio", "WorstOf", "combination",
           "fieller_ratio", "hoeffding_tail", "images_for_power", "law_free_reach", "minimum_detectable", "mover_limit",
           "pair_limit", "pairs", "unit_mean", "unit_ratio", "worst_of"]
