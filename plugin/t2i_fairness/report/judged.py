"""What a judged verdict rests on (gates whose number counts a scorer's per-image judgements: CIS): how
wrong the scorer would have to be in the gate's group to flip the verdict, and how many labels an audit
would need for an interval about as narrow as the scorer-only one (:mod:`t2i_fairness.metrics.agreement`)."""

from __future__ import annotations

import dataclasses

from t2i_fairness.metrics.agreement import flip_margin, labels_for_width
from t2i_fairness.metrics.intervals.value import bound_cannot_fail

__all__ = ["ASSUMED_DISAGREEMENT", "WIDTH_RATIO", "audit_labels", "audit_plan_lines", "judged_lines", "planned_disagreement",
           "scorer_agreement"]

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
        named = r.details.get("component") or r.details.get("group")
        group = f" ({named})" if named else ""
        audit = r.details.get("audit") or {}
        if audit.get("labels"):  # decided on the labels: the scorer's error is measured, not assumed
            before = audit["scorer_only"]
            out.append(f"{r.gate}{group}: {r.status}, audited: {audit['labels']:,} human labels and "
                       f"{audit['judgements']:,} {scorer['judged_by']} judgements (scorer-only: {before['status']}, "
                       f"{before['value']:.4f})")
            continue
        margin = flip_margin(r.direction, float(r.bound), r.interval)
        toward = "higher" if (r.status == "fail") == (r.direction == "min") else "lower"
        line = (f"{r.gate}{group}: {r.status}, resting on {scorer['judgements']} {scorer['judged_by']} judgements; "
                f"it flips if the truth were {margin:.3g} {toward} than the scorer says (a net error of that share of "
                "what the group's images show)")
        audit = audit_labels(r)
        if audit is not None:
            line += (f"; an audit of {audit[0]} labels gives an interval within {WIDTH_RATIO:g}x the scorer-only one "
                     f"({audit[1]})")
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


def audit_labels(r) -> tuple[int, str] | None:
    """The labels an audit of judged gate ``r`` needs for an interval within :data:`WIDTH_RATIO` x its scorer-only one,
    and the disagreement that count is planned for (``None``: the gate has no standard error)."""
    scorer = r.details["scorer"]
    measured = scorer.get("disagreement")
    d = ASSUMED_DISAGREEMENT if measured is None else planned_disagreement(measured, int(scorer["labels"]))
    se = (r.uncertainty or {}).get("se")
    if not se:
        return None
    source = (f"disagreement {measured:.3g} measured on {scorer['labels']} labels, planned at its 95% upper "
              f"limit {d:.3g}" if measured is not None else f"disagreement {d:g} assumed: no labels")
    return labels_for_width(float(se), d, WIDTH_RATIO), source


def audit_plan_lines(artifacts, gate_ids) -> list[str]:
    """``t2i-fairness plan``'s audit lines: for the selected judged gates the last run (``<artifacts>/run.json``)
    decided, the labels an audit needs for intervals within :data:`WIDTH_RATIO` x the scorer-only ones (none
    without such a run)."""
    from types import SimpleNamespace

    from t2i_fairness.report.last_run import last_run_gates

    path, records, _ = last_run_gates(artifacts)
    wanted, needs = set(gate_ids), []
    for raw in records or ():
        r = SimpleNamespace(**{k: raw.get(k) for k in ("gate", "details", "uncertainty", "status")})
        if r.gate in wanted and isinstance(r.details, dict) and r.details.get("scorer") and r.status != "skip":
            audit = audit_labels(r)
            if audit is not None:
                needs.append((audit[0], r.gate, audit[1]))
    if not needs:
        return []
    most, gate, source = max(needs)
    return [f"audit (from the last run, {path}): {most} labels per group give each of the {len(needs)} judged gate(s) "
            f"an interval within {WIDTH_RATIO:g}x its scorer-only one (the most: {gate}, {source}); "
            "`t2i-fairness audit RUN --per-group N` draws them"]


def planned_disagreement(measured: float, labels: int) -> float:
    """The disagreement an audit is planned for: the one-sided 95% Clopper-Pearson upper limit of the share measured
    on ``labels`` labels (0 of 128 plans for 0.023, not for a scorer that is never wrong).

    Example:
        >>> round(planned_disagreement(0.0, 128), 4), round(planned_disagreement(0.1, 1000), 4)
        (0.0231, 0.117)
    """
    from t2i_fairness.metrics.agreement import clopper_pearson

    k = round(float(measured) * labels)
    return clopper_pearson(k, labels, confidence=0.90)[1] if labels > 0 else ASSUMED_DISAGREEMENT


def _upper(a) -> float:
    """The lower of an agreement's two interval upper ends (its sensitivity's, its specificity's)."""
    return min([iv[1] for iv, n in ((a.sensitivity_interval, a.positives), (a.specificity_interval, a.negatives)) if n]
               or [1.0])


def scorer_agreement(judgements, what: str, t2i_report, name: str, focus: str | None = None,
                     judged_by: str = "clip", unit: str = "component", labels: str = "the images' own truth") -> dict:
    """What a gate rests on: a scorer's per-image judgements (:class:`~t2i_fairness.metrics.agreement.Judgement`),
    and where labels exist its agreement with them per group (a section naming the groups where it
    disagrees, ``<name>.json`` with every one); returns the gate's ``scorer`` details (``focus``: the gate's
    own group, reported whatever its agreement; ``unit``: what a group is, in words; ``labels``: where the labels
    come from, in words)."""
    from t2i_fairness.metrics.agreement import AGREEMENT_FLOOR, agreement_by_group, disagreeing

    labelled = [j for j in judgements if j.truth is not None]
    out = {"judged_by": judged_by, "judgements": len(judgements), "labels": len(labelled)}
    if not labelled:
        return out
    groups = agreement_by_group(labelled)
    pooled = agreement_by_group([dataclasses.replace(j, group="pooled") for j in labelled])["pooled"]
    bad = sorted(disagreeing(groups.values()), key=lambda a: (_upper(a), a.group))  # the surest first
    out.update(agreement=pooled.to_dict(), disagreement=pooled.disagreement, pooled_disagrees=bool(disagreeing([pooled])),
               disagreeing=[a.group for a in bad], focus=groups[focus].to_dict() if focus in groups else None)
    lines = [f"{len(labelled)} of {len(judgements)} judgements labelled (labels: {labels}); pooled "
             + pooled.text().removeprefix("pooled: ")]
    if out["pooled_disagrees"]:
        lines.append(f"the scorer disagrees with the labels over every {unit} pooled (below {AGREEMENT_FLOOR:g}): "
                     "this gate measures the scorer, not the generator")
    if focus in groups:
        lines.append("the gate's group, " + groups[focus].text())
    lines += [f"the scorer disagrees with the labels for {a.text()} (below {AGREEMENT_FLOOR:g}): a gate of this "
              "group measures the scorer there, not the generator" for a in bad[:5]]
    if len(bad) > 5:
        lines.append(f"... and {len(bad) - 5} more {unit}s where the scorer disagrees with the labels "
                     f"(every one: {name}.json)")
    t2i_report.section(f"{what}: the scorer against the labels", lines)
    t2i_report.json(name, [a.to_dict() for a in groups.values()])
    return out
