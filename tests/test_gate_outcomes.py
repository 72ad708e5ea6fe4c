"""A gate's verdict is the gating layer's own outcome (GateFailed, GateSkipped); the plugin makes it pytest's.

That gating imports no pytest is import-linter's contract "only the plugin ... import pytest" (``make test``
runs it); these tests check the two halves: what ``Gate`` raises, and what pytest shows.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from t2i_fairness.errors import GateFailed, GateOutcome, GateSkipped
from t2i_fairness.gating.gate import Gate, GateContext
from t2i_fairness.gating.thresholds import Bound, ThresholdFile
from t2i_fairness.spine.options import T2IOptions


def _gate(bounds: dict) -> tuple[Gate, list]:
    records: list = []
    ctx = GateContext(gate_id="g", nodeid="t.py::test_g", family=None, options=T2IOptions(),
                      thresholds=ThresholdFile(Path("t.yaml"), bounds), provenance=dict, emit=records.append)
    return Gate(ctx), records


def test_a_failed_verdict_is_raised_as_gate_failed_which_except_exception_cannot_swallow():
    gate, records = _gate({"g": Bound("min", 0.9)})
    with pytest.raises(GateFailed, match=r"^g: ") as caught:
        try:
            gate(0.1, n=10_000, interval=(0.05, 0.15))
        except Exception:  # noqa: BLE001  (a test's own try/except must not hide a verdict)
            pytest.fail("a gate's verdict was caught by `except Exception`")
    assert isinstance(caught.value, GateOutcome) and not isinstance(caught.value, Exception)
    assert [r.status for r in records] == ["fail"] and records[0].message == str(caught.value)


def test_a_passing_gate_raises_nothing_and_an_undefined_one_skips_without_a_bound_and_fails_with_one():
    gate, records = _gate({"g": Bound("min", 0.1)})
    gate(0.9, n=10_000, interval=(0.85, 0.95))
    assert [r.status for r in records] == ["pass"]
    with pytest.raises(GateSkipped, match="no region drawn"):
        _gate({})[0].undefined("no region drawn")
    with pytest.raises(GateFailed, match="no region drawn; the gate has a bound in t.yaml, so it cannot pass"):
        gate.undefined("no region drawn")


def test_the_plugin_turns_them_into_pytests_failure_and_skip_without_a_traceback(pytester):
    pytester.makepyfile(test_outcomes="""
        from t2i_fairness.errors import GateFailed, GateSkipped

        def test_fails():
            raise GateFailed("g: 0.1000 is below the bound 0.9 (the verdict)")

        def test_skips():
            raise GateSkipped("no region drawn")
    """)
    result = pytester.runpytest_inprocess("-rs", "-p", "no:randomly")
    result.assert_outcomes(failed=1, skipped=1)
    result.stdout.fnmatch_lines(["*g: 0.1000 is below the bound 0.9 (the verdict)*",
                                 "SKIPPED [[]1[]] test_outcomes.py:*: no region drawn"])
    assert "raise GateFailed" not in result.stdout.str()  # pytrace=False: the message, not the traceback
