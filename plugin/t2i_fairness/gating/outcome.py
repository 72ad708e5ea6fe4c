"""What pytest itself decided about a run, so that no report of ours can contradict it.

Gate records cannot tell of a test that crashed before ``gate()``, was skipped or never ran
(Ctrl-C, ``-x``); the hooks feed every test report into a :class:`RunOutcome`, and every report
takes its verdict from :meth:`RunOutcome.verdict`, which combines the two.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

__all__ = ["OK_STATUSES", "RunOutcome", "RunVerdict", "Selection", "TestOutcome", "first_line"]

OK_STATUSES = ("pass", "written", "inconclusive")  # gate statuses whose test passes (inconclusive: unless blocking)
FAILING_STATUSES = ("fail", "missing", "refused")  # statuses whose test fails (a new one shows as itself)

# pytest's exit codes (pytest.ExitCode), here without importing pytest
EXIT_OK, EXIT_TESTS_FAILED, EXIT_INTERRUPTED, EXIT_INTERNAL_ERROR, EXIT_USAGE_ERROR, EXIT_NO_TESTS = 0, 1, 2, 3, 4, 5


def first_line(text: Any, limit: int = 300) -> str:
    """The first non-empty line of a message, cut at ``limit`` characters.

    Example:
        >>> first_line("\\nValueError: bad\\n  more")
        'ValueError: bad'
    """
    for line in str(text or "").splitlines():
        if line.strip():
            line = line.strip()
            return line if len(line) <= limit else line[: limit - 3] + "..."
    return ""


@dataclass
class TestOutcome:
    """One test as pytest saw it: ``outcome`` is ``passed``, ``failed``, ``error`` (setup, teardown or
    collection), ``skipped``, ``xfailed`` or ``xpassed``; ``when`` the phase that decided it.
    """

    __test__ = False  # not a pytest test class, despite the name

    nodeid: str
    outcome: str
    when: str = "call"
    message: str = ""
    path: str | None = None  # the test's file, relative to the rootdir (for CI annotations)
    line: int | None = None  # 1-based line of the test function

    @property
    def bad(self) -> bool:
        return self.outcome in ("failed", "error")


@dataclass
class Selection:
    """Which of the collected tests ran.

    Attributes:
        collected: tests collected, before any deselection.
        how: the command line's selectors, as typed (``-k africa``, ``--lf``, ``2 node ids``).
        partial_args: whether file or node-id arguments named only part of the suite.
        functions: the test functions collected, for the unused-gate check.
    """

    collected: int = 0
    selected: int = 0
    how: list[str] = field(default_factory=list)
    partial_args: bool = False
    functions: list[str] = field(default_factory=list)
    gate_tests: int = 0

    @property
    def whole(self) -> bool:
        """True when nothing was deselected and no selector narrowed the run."""
        return not self.how and self.selected == self.collected

    def line(self) -> str:
        """``43 of 490 tests selected by -k africa`` (or ``all 490 tests selected``)."""
        if self.whole:
            return f"all {self.selected} tests selected"
        by = f" by {', '.join(self.how)}" if self.how else ""
        return f"{self.selected} of {self.collected} tests selected{by}"

    def merge(self, other: dict) -> None:
        """Add what a pytest-xdist worker collected (every worker collects the same tests)."""
        self.collected = max(self.collected, int(other.get("collected", 0)))
        self.selected = max(self.selected, int(other.get("selected", 0)))
        self.gate_tests = max(self.gate_tests, int(other.get("gate_tests", 0)))
        self.functions = sorted(set(self.functions) | set(other.get("functions", ())))


@dataclass
class RunVerdict:
    """The run's verdict: a word (``PASSED``, ``FAILED``, ``INTERRUPTED``, ``ERROR``, ``NO GATES``),
    whether it passed, the one-line headline and the lines that explain it."""

    word: str
    passed: bool
    headline: str
    notes: list[str] = field(default_factory=list)


@dataclass
class RunOutcome:
    """The tests pytest ran and how the run ended; fed by the plugin's hooks.

    Example:
        >>> o = RunOutcome(selection=Selection(3, 3))
        >>> o.add("t.py::test_a", "call", "passed")
        >>> o.add("t.py::test_b", "call", "failed", "ZeroDivisionError: division by zero")
        >>> o.finish(1)
        >>> v = o.verdict([dict(nodeid="t.py::test_a", status="pass")])
        >>> v.word, v.headline
        ('FAILED', 'FAILED: 1 of 2 tests failed (1 gate ok; 1 test crashed before gate()); 1 selected test did not run')
    """

    tests: dict[str, TestOutcome] = field(default_factory=dict)
    selection: Selection = field(default_factory=Selection)
    exitstatus: int | None = None
    interrupted: str | None = None  # what interrupted the run (KeyboardInterrupt, pytest.exit's reason)
    escalated: list[str] = field(default_factory=list)  # gates only the step-down across the run rejects
    stopped: str | None = None  # why the run stopped early (-x, --maxfail)

    def add(self, nodeid: str, when: str, outcome: str, message: str = "", xfail: bool = False,
            path: str | None = None, line: int | None = None) -> None:
        """One phase's report. A failure in setup or teardown is an error; a later phase never
        overrides an earlier failure; ``xfail`` marks pytest's expected failures."""
        if xfail:
            outcome = "xfailed" if outcome == "skipped" else ("xpassed" if outcome == "passed" else outcome)
        elif outcome == "failed" and when != "call":
            outcome = "error"
        old = self.tests.get(nodeid)
        if old is not None and (old.bad or (outcome == "passed" and when == "teardown")):
            return  # the first failure stands; a passing teardown changes nothing
        if outcome == "passed" and when == "setup":
            if old is None:
                self.tests[nodeid] = TestOutcome(nodeid, "running", when, "", path, line)
            return
        self.tests[nodeid] = TestOutcome(nodeid, outcome, when, first_line(message), path, line)

    def finish(self, exitstatus: int, interrupted: str | None = None, stopped: str | None = None) -> None:
        self.exitstatus = int(exitstatus)
        self.interrupted = interrupted or self.interrupted
        self.stopped = stopped or self.stopped
        if self.exitstatus == EXIT_INTERRUPTED and not self.interrupted and not any(
                t.when == "collect" for t in self.tests.values()):
            self.interrupted = "the run was interrupted"

    # -- what reports show ---------------------------------------------------------------------------
    def without_gate(self, records: Iterable[Any]) -> list[TestOutcome]:
        """Tests that produced no gate record and did not pass: crashed, errored, skipped, unfinished."""
        with_gate = {_get(r, "nodeid") for r in records}
        return [t for t in self.tests.values() if t.nodeid not in with_gate and t.outcome != "passed"]

    def kind(self, test: TestOutcome, records: Iterable[Any] = ()) -> str:
        """How a report names what happened to a test: ``crashed before gate()``, ``error in setup``, ..."""
        if test.outcome == "failed":
            statuses = [_get(r, "status") for r in records if _get(r, "nodeid") == test.nodeid]
            if not statuses:
                return "crashed before gate()"
            return "failed after its gate" if all(s in OK_STATUSES for s in statuses) else "gate failed"
        if test.outcome == "error":
            return "collection error" if test.when == "collect" else f"error in {test.when}"
        if test.outcome == "running":
            return "interrupted"
        return test.outcome

    def verdict(self, records: Iterable[Any]) -> RunVerdict:
        """The run's verdict from the gate records and pytest's outcomes: ``PASSED`` only when pytest's own
        outcome is a pass, every test that ran passed or was skipped, and nothing stopped the run.
        """
        records = [r for r in records if _get(r, "status") != "baseline"]
        counts: dict[str, int] = {}
        for r in records:
            s = _get(r, "status")
            counts[s] = counts.get(s, 0) + 1
        weak = sum(1 for r in records if _get(r, "status") == "pass" and (_get(r, "power") or {}).get("underpowered"))
        gate_part = ", ".join(f"{n} gate{'s' if n != 1 else ''} {'ok' if s == 'pass' else s}"
                              + (f" ({weak} underpowered)" if s == "pass" and weak else "") for s, n in counts.items())
        bad_tests = [t for t in self.tests.values() if t.bad]
        problems = self._problems(records)
        ran = sum(1 for t in self.tests.values() if t.when != "collect")
        not_run = max(0, self.selection.selected - ran) if self.selection.selected else 0
        notes = [f"{self.kind(t, records)}: {t.nodeid}" + (f": {t.message}" if t.message else "")
                 for t in self.tests.values() if (t.bad or t.outcome in ("skipped", "running", "xpassed"))
                 and self.kind(t, records) != "gate failed"]
        tail = []
        if self.stopped:
            tail.append(f"stopped early ({self.stopped})")
        if not_run:
            tail.append(f"{not_run} selected test{'s' if not_run != 1 else ''} did not run")
        suffix = ("; " + "; ".join(tail)) if tail else ""
        parts = "; ".join(p for p in [gate_part, problems] if p)
        detail = f" ({parts})" if parts else ""
        if self.interrupted:
            return RunVerdict("INTERRUPTED", False, f"INTERRUPTED: {self.interrupted} after {ran} of "
                              f"{self.selection.selected or ran} tests{detail}{suffix}", notes)
        failed_gates = sum(n for s, n in counts.items() if s in FAILING_STATUSES)
        exit_bad = self.exitstatus not in (None, EXIT_OK, EXIT_TESTS_FAILED, EXIT_NO_TESTS)
        failed_gates += len(self.escalated)
        if bad_tests or failed_gates or self.exitstatus == EXIT_TESTS_FAILED:
            what = (f"{len(bad_tests)} of {ran} tests failed" if bad_tests
                    else f"{failed_gates} of {len(records)} gates failed")
            if self.escalated:
                what += f" ({len(self.escalated)} by the step-down across the run)"
            return RunVerdict("FAILED", False, f"FAILED: {what}{detail}{suffix}", notes)
        if exit_bad:
            return RunVerdict("ERROR", False, f"ERROR: pytest ended with exit status {self.exitstatus}{detail}{suffix}", notes)
        if not records:
            return RunVerdict("NO GATES", self.exitstatus in (None, EXIT_OK, EXIT_NO_TESTS),
                              f"No gate ran{detail}{suffix}", notes)
        if self.stopped or not_run:
            return RunVerdict("INCOMPLETE", False, f"INCOMPLETE: {len(records)} gates{detail}{suffix}", notes)
        return RunVerdict("PASSED", True, f"PASSED: {len(records)} gates{detail}", notes)

    def _problems(self, records: list) -> str:
        kinds: dict[str, int] = {}
        for t in self.tests.values():
            if t.bad or t.outcome in ("skipped", "running", "xfailed", "xpassed"):
                k = self.kind(t, records)
                if k == "gate failed":
                    continue  # counted among the gates
                kinds[k] = kinds.get(k, 0) + 1
        return "; ".join(f"{n} test{'s' if n != 1 else ''} {k}" for k, n in kinds.items())

    def to_dict(self, records: Iterable[Any] = ()) -> dict:
        """JSON-able: the verdict, the selection and every test that did not simply pass."""
        records = list(records)
        v = self.verdict(records)
        return {
            "verdict": v.word, "passed": v.passed, "headline": v.headline,
            "exitstatus": self.exitstatus, "interrupted": self.interrupted, "stopped": self.stopped,
            "selection": {**asdict(self.selection), "line": self.selection.line(), "functions": None},
            "tests": [{**asdict(t), "kind": self.kind(t, records)} for t in self.tests.values() if t.outcome != "passed"],
        }


def _get(record: Any, name: str) -> Any:
    return record.get(name) if isinstance(record, dict) else getattr(record, name, None)
