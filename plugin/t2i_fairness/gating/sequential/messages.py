"""What a sequential gate's look says: the verdict of an early stop (:func:`early_record`) and the one-line
text of a look (:func:`gate_line`, :func:`where_parts`) that the terminal, HTML and JUnit reports print."""

from __future__ import annotations

import dataclasses
from typing import Any

from t2i_fairness.gating.sequential.look import Look, Reason
from t2i_fairness.gating.sequential.stopping import NEGLIGIBLE_POWER

__all__ = ["cannot_fail_clause", "early_record", "futility_clause", "gate_line", "where_parts"]


def _where(look: Look) -> str:
    return f"look {look.round} of {look.rounds} ({look.at} of {look.planned} {look.unit})"


def cannot_fail_clause(look: Look | Any) -> str:
    """What a look that curtailed a gate no outcome at ``N`` can fail says."""
    look = Look.of(look)
    return (f"passed early by curtailment at {_where(look)}: no outcome of its test at N can fail it at its level "
            f"{look.gate_level:.3g} (a test over its prompts claims no p-value that small, its bound lies at a "
            f"share's edge, or its groups' real images are too few for any coverage to reach it), so stopping here "
            f"costs none of its power")


def early_record(record, look: Look | Any, bound):
    """A gate record made into the verdict of an early stop (``look``, or its run.json dict): a fail at the alpha
    its look spent, or a pass by futility or curtailment, at the sequential p-value, its message naming the look.

    Example:
        >>> from t2i_fairness.gating.session import GateRecord
        >>> from t2i_fairness.gating.thresholds import Bound
        >>> r = GateRecord("g", "t::g", 0.5, 64, "min", "fail", 0.8, None, "g: measured 0.5000", {})
        >>> look = Look("share", Reason.FAIL, True, 1, 4, "images per prompt", 16, 60, p=1e-9, level=3e-8,
        ...             gate_level=1e-4, alpha_share=3e-4, p_sequential=3.3e-6)
        >>> print(early_record(r, look, Bound("min", 0.8)).message)
        g: measured 0.5000; FAILED early at look 1 of 4 (16 of 60 images per prompt): p = 1e-09 <= 3e-08, the alpha this look spends (O'Brien-Fleming share 0.0003 of the gate's level 0.0001)
    """
    s = Look.of(look)
    where = _where(s)
    head = record.message.split("; p = ")[0]
    if s.reason is Reason.FAIL:
        message = (f"{head}; FAILED early at {where}: p = {s.p:.3g} <= {s.level:.3g}, the alpha this look "
                   f"spends (O'Brien-Fleming share {s.alpha_share:.2g} of the gate's level {s.gate_level:.3g})")
        status = "fail"
    elif s.reason is Reason.CURTAIL and s.conditional_power == 0.0:
        message = f"{head}; {cannot_fail_clause(s)}"
        status = "pass"
    elif s.reason is Reason.CURTAIL:
        message = f"{head}; passed early by curtailment at {where}: " + _curtail_clause(s)
        status = "pass"
        if record.status == "inconclusive":  # the look's estimate misses the bound without evidence: said, as at N
            message += "; its estimate at this look misses the bound without evidence (inconclusive at this size)"
            return dataclasses.replace(record, status="inconclusive", message=message, p_value=s.p_sequential,
                                       threshold=s.gate_level)
    elif s.kind == "test":  # a test (no bound): futility against an effect of its own size
        message = (f"{head}; passed early by futility at {where}: the largest effect its {1 - s.futility_beta:.4g} "
                   f"one-sided limits leave possible is {s.futility_limit:.4f} < {s.futility_miss:g} (half "
                   f"the effect it states power against), so a model with an effect of {s.futility_miss:g} would "
                   f"stop here at most {s.futility_beta:.2g} of the time; its test never fails before N")
        status = "pass"
    else:
        message = f"{head}; passed early by futility at {where}: " + futility_clause(s, bound)
        status = "pass"
    return dataclasses.replace(record, status=status, message=message, p_value=s.p_sequential,
                               threshold=s.gate_level, blocking=False)


def _ruled_out(s: Look, bound) -> tuple[str, float | None]:
    """What the look's limit rules out, in words, and the largest miss it leaves possible (``None``: no bound)."""
    low = bound is None or bound.direction == "min"
    limit = f"its {1 - s.futility_beta:.4g} one-sided limit {s.futility_limit:.4f}"
    if bound is None:
        return limit, None
    possible = (bound.value - s.futility_limit) if low else (s.futility_limit - bound.value)
    if possible <= 0:
        return f"{limit} clears the bound {bound.value:g} itself: it rules out any miss", 0.0
    return f"{limit} rules out a miss of more than {possible:.4f}", possible


def futility_clause(look: Look | Any, bound) -> str:
    """What a futility pass ruled out and what it costs: the margin at ``N`` (the default) or a team's margin."""
    s = Look.of(look)
    ruled, _ = _ruled_out(s, bound)
    wrong = f"a larger miss passes here only if the limit is wrong, at most {s.futility_beta:.2g} of the time"
    if s.futility_basis == "indifference":
        return (f"any miss is below {s.futility_miss:g}, the margin this gate allows ({ruled}; a team's indifference "
                f"margin from the thresholds file, not the fixed-N test's: the fixed-N run may catch a smaller miss); "
                f"{wrong}")
    if s.futility_miss is not None and s.futility_miss == float("inf"):
        return f"{ruled}, and no miss is one its test at N could catch: stopping here costs none of its power"
    return (f"{ruled} ({wrong}), and any miss up to {s.futility_miss:.4g} is one its fixed-N test at N would catch at "
            f"most {NEGLIGIBLE_POWER:g} of the time: stopping here keeps the fixed-N power at every miss within "
            f"{NEGLIGIBLE_POWER:g}")


def _curtail_clause(s: Look) -> str:
    if s.curtail_miss is None:  # a record an earlier version wrote: the kind's meaningful miss
        return (f"its conditional power {s.conditional_power:.2g} at N is below {s.curtail_gamma:g}, so stopping "
                f"here costs at most {s.curtail_gamma:g} of its power")
    return (f"were it to miss the bound by {s.curtail_miss:.4g} (the largest miss its limit at this look leaves "
            f"possible, at least 0), the fixed-N test at N would fail it with probability {s.conditional_power:.2g} "
            f"given this look (< {s.curtail_gamma:g}); a smaller miss less often: stopping here costs at most "
            f"{s.curtail_gamma:g} of its power at any miss up to {s.curtail_miss:.4g}, and beyond it only where its "
            f"limit is wrong (at most {s.futility_beta or 0.005:.2g})")


def where_parts(look: Look | Any) -> list[str]:
    """Where a gate stopped, as phrases: ``look r of R``, ``n of N <unit>`` (each only when the record has it).

    Example:
        >>> where_parts({"round": 2, "rounds": 3, "at": 8, "planned": 16, "unit": "images per prompt"})
        ['look 2 of 3', '8 of 16 images per prompt']
    """
    s = Look.of(look)
    if s is None:
        return []
    out = []
    if s.round is not None and s.rounds is not None:
        out.append(f"look {s.round} of {s.rounds}")
    if s.at is not None and s.planned is not None:
        out.append(f"{s.at} of {s.planned} {s.unit or 'images per prompt'}")
    return out


def gate_line(look: Look | Any) -> str:
    """One gate's look in a line: reason, look r of R, n of N, and the level that decided.

    Example:
        >>> gate_line({"kind": "share", "reason": "pass: futility", "early": True, "round": 1, "rounds": 3,
        ...            "at": 4, "planned": 16, "unit": "images per prompt", "futility_limit": 0.71, "futility_miss": 0.05})
        'pass: futility at look 1 of 3, 4 of 16 images per prompt (limit 0.7100, margin at N 0.05)'
    """
    s = Look.of(look) if look else None
    if s is None:
        return ""
    parts = where_parts(s)
    line = "?" if s.reason is None else str(s.reason)
    if parts:
        line += " at " + ", ".join(parts)
    if s.reason is Reason.FAIL and s.p is not None:
        line += f" (p {s.p:.3g} <= {s.level:.3g})"
    elif s.futility_limit is not None:
        what = {"indifference": "indifference margin", "effect": "futility effect"}.get(s.futility_basis, "margin at N")
        line += f" (limit {s.futility_limit:.4f}, {what} {s.futility_miss:.4g})"
    elif s.conditional_power is not None:
        miss = s.curtail_miss
        line += f" (conditional power {s.conditional_power:.2g}" + (f" at a miss of {miss:g})" if miss is not None else ")")
    if s.note:
        line += f" ({s.note})"
    return line
