"""Components Inclusion Score (Foong et al. 2023, "The Challenges of Image Generation Models in Generating
Multi-Component Images"; shared/papers/components-inclusion-score.txt): CIS_K, the drop per component,
per-component generation rates, the order-invariance test, Inception Score and FID per K.

Gate tests: ``fairness_tests/test_cis.py``; the study is the ``cis`` fixture
(:class:`~t2i_fairness.families.cis.study.CisStudy`).
"""

from __future__ import annotations

from t2i_fairness.families.base import Family, Parameters
from t2i_fairness.families.cis.canaries import CANARIES
from t2i_fairness.families.cis.options import OPTIONS, resolve
from t2i_fairness.metrics.cis import ORDER_EFFECT


def _parameters(names: set[str], core, options) -> list[Parameters]:
    if "cis_k" not in names:
        return []
    return [Parameters(("cis_k",), [(k,) for k in options.ks], [f"k{k}" for k in options.ks])]


def _header(core, o) -> str:
    fid = f"FID reference {o.fid_reference}" if o.fid_reference else "no FID reference"
    names = "" if o.components is None else f"; components drawn from {len(o.components)} names (--t2i-cis-components)"
    return (f"t2i-fairness CIS: K={','.join(map(str, o.ks))}; {o.prompts} prompts per K, {o.images} images per prompt; "
            f"order test on {o.order_prompts} prompts; {fid}{names}")


FAMILY = Family(
    name="cis",
    title="Components Inclusion Score",
    paper="Foong et al. 2023, The Challenges of Image Generation Models in Generating Multi-Component Images "
          "(shared/papers/components-inclusion-score.txt)",
    study_type=".study:CisStudy",
    options=OPTIONS,
    resolve=resolve,
    parameters=_parameters,
    header=_header,
    needs=".study:needs",
    look=lambda study, n: study.at_prompts(n),
    scorers=("clip", "inception"),
    # the order test's futility miss: half the order effect its report states power against (first-named component
    # drawn ORDER_EFFECT more often than the last, linear: a position ORDER_EFFECT / 2 from the mean over positions)
    futility_miss=(("test", ORDER_EFFECT / 4),),
    null_shares="null_shares.json",
    doc="The session's Components Inclusion Score study (:class:`~t2i_fairness.families.cis.study.CisStudy`).",
    canaries=CANARIES,
)
