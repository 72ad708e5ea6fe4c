"""What a judged verdict rests on (gates whose number counts a scorer's per-image judgements: CIS): how
wrong the scorer would have to be in the gate's group to flip the verdict, and how many labels an audit
would need for an interval about as narrow as the scorer-only one (:mod:`t2i_fairness.metrics.agreement`)."""

from __future__ import annotations

from t2i_fairness.metrics.agreement import flip_margin, labels_for_width
from t2i_fairness.metrics.intervals.value import bound_cannot_fail

__all__ = ["ASSUMED_DISAGREEMENT", "WIDTH_RATIO", "judged_lines"]

#: The scorer's error share assumed where no label measured it (a scorer wrong on one judgement in ten).
ASSUMED_DISAGREEMENT = 0.1
#: The audited interval's width the label count aims at, relative to the scorer-only interval's.
WIDTH_RATIO = 1.1


def judged_lines(records) -> list[str]:
    """One line per judged gate (its details carry ``scorer``), as the summary prints them."""
    out = []
    for r in sorted(records, key=lambda r: r.gate):
        scorer = (r.details or {}).get("scorer") if isinstance(r.details, dict) else None
        if not scorer or r.bound is None or not r.interval or r.status not in ("pass", "fail", "inconclusive"):
            continue
        if bound_cannot_fail(r.direction, r.bound, r.uncertainty):  # no scorer error flips it: said once elsewhere
            continue
        group = (r.details.get("component") and f" ({r.details['component']})") or ""
        margin = flip_margin(r.direction, float(r.bound), r.interval)
        toward = "higher" if (r.status == "fail") == (r.direction == "min") else "lower"
        line = (f"{r.gate}{group}: {r.status}, resting on {scorer['judgements']} {scorer['judged_by']} judgements; "
                f"it flips if the truth were {margin:.3g} {toward} than the scorer says (a net error of that share of "
                "what the group's images show)")
        measured = scorer.get("disagreement")
        d = measured if measured is not None else ASSUMED_DISAGREEMENT
        se = (r.uncertainty or {}).get("se")
        source = (f"disagreement {d:.3g} measured on {scorer['labels']} labels" if measured is not None else
                  f"disagreement {d:g} assumed: no labels")
        if se:
            line += (f"; an audit of {labels_for_width(float(se), d, WIDTH_RATIO)} labels gives an interval within "
                     f"{WIDTH_RATIO:g}x the scorer-only one ({source})")
        agreement = scorer.get("focus") or scorer.get("agreement")
        if agreement and agreement.get("positives"):
            lo, hi = agreement["sensitivity_interval"]
            line += f"; the scorer's sensitivity there {agreement['sensitivity']:.2f} [{lo:.2f}, {hi:.2f}]"
        if scorer.get("pooled_disagrees"):
            line += "; the scorer disagrees with the labels over the gate's images: it measures the scorer"
        if scorer.get("disagreeing"):
            line += f"; the scorer disagrees with the labels for {', '.join(scorer['disagreeing'][:5])}"
        out.append(line)
    return ["", "-- judged gates: what each verdict rests on --"] + out if out else []
