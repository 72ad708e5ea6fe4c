"""The pytest plugin: options, the ``t2i`` and ``gate`` fixtures, and one-line hooks.

All logic lives in plain modules (``workbench``, ``gates``, ``session``); heavy imports happen
only when a fixture is first used, so collecting or running unrelated tests stays fast.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import warnings
from typing import Any, Callable

import pytest

from .gates import Measurement, ThresholdFile, ThresholdFileError, evaluate
from .options import T2IOptions, add_options, resolve_options
from .session import PROPERTY, SECTION, GateReport, GateRecord, GateSession

OPTIONS = pytest.StashKey[T2IOptions]()
SESSION = pytest.StashKey[GateSession]()
THRESHOLDS = pytest.StashKey[ThresholdFile]()


class T2IProvenanceWarning(UserWarning):
    """A gate's bound was set under other settings (model, scorers, sample sizes, versions, device)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    options = resolve_options(config)
    try:
        config.stash[THRESHOLDS] = ThresholdFile.load(options.thresholds)
    except ThresholdFileError as exc:
        raise pytest.UsageError(f"--t2i-thresholds: {exc}") from None
    config.stash[OPTIONS] = options
    config.stash[SESSION] = GateSession(options.thresholds)
    config.pluginmanager.register(GateHooks(config, config.stash[SESSION]), "t2i-fairness-gates")


def pytest_report_header(config: pytest.Config) -> str:
    o = config.stash[OPTIONS]
    smoke = " (built-in smoke model with random weights: its numbers say nothing about fairness)" if o.model == "tiny" else ""
    return (
        f"t2i-fairness: model {o.model}{smoke}; scorers {o.scorers}; {len(o.objects)} objects, "
        f"{o.images_per_prompt} images/prompt, seed {o.seed}; thresholds {o.thresholds}"
    )


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _progress_for(config: pytest.Config):
    """Progress bars that reach the terminal through pytest's output capture."""
    from .generation import tqdm_progress

    @contextlib.contextmanager
    def progress(total: int, desc: str):
        capman = config.pluginmanager.getplugin("capturemanager")
        with (capman.global_and_fixture_disabled() if capman else contextlib.nullcontext()):
            sys.stderr.write("\n")
            with tqdm_progress(total, desc) as advance:
                yield advance

    return progress


@pytest.fixture(scope="session")
def t2i(pytestconfig: pytest.Config):
    """The session's :class:`~t2i_fairness.workbench.Workbench`: generator, cache and scorers."""
    from .workbench import Workbench

    def fatal(message: str) -> None:
        pytest.exit(f"t2i-fairness: {message}", returncode=pytest.ExitCode.USAGE_ERROR)

    options = pytestconfig.stash[OPTIONS]
    try:
        bench = Workbench(options, _progress_for(pytestconfig) if options.progress and not _is_worker(pytestconfig) else None, fatal)
    except Exception as exc:  # a bad model spec or cache folder ends the session with one clear message
        from .generators import ModelLoadError

        if isinstance(exc, (ModelLoadError, OSError)):
            fatal(str(exc))
        raise
    yield bench
    stats = dataclasses.asdict(bench.cache.stats)
    if _is_worker(pytestconfig):
        pytestconfig.workeroutput["t2i_cache"] = stats  # type: ignore[attr-defined]
    else:
        pytestconfig.stash[SESSION].merge_cache_stats(stats)


@pytest.fixture
def gate(request: pytest.FixtureRequest, t2i) -> Callable[..., Measurement]:
    """Check a measured indicator against its bound in the thresholds file.

    ``gate(value, n=..., higher_is_better=True, interval=None, details=None, name=None, provenance=None)``;
    the gate id is the test's name (``test_object_consistency[object_in_region-africa]``) unless ``name``
    is given. ``provenance`` adds the settings of the test's own options (e.g. its sample sizes) to the
    session's, so a bound is never compared silently with a number measured under other settings.
    """
    config = request.config
    options = config.stash[OPTIONS]
    thresholds = config.stash[THRESHOLDS]

    def check(value: float, *, n: int, higher_is_better: bool = True, interval=None,
              details: dict[str, Any] | None = None, name: str | None = None,
              provenance: dict[str, Any] | None = None) -> Measurement:
        __tracebackhide__ = True
        m = Measurement(name or request.node.name, float(value), int(n), "min" if higher_is_better else "max",
                        tuple(interval) if interval is not None else None, details or {})
        provenance = {**t2i.provenance(), **(provenance or {})}
        verdict = evaluate(m, thresholds, provenance, update=options.update_thresholds, allow_loosen=options.allow_loosen)
        record = GateRecord(
            gate=m.gate, nodeid=request.node.nodeid, value=m.value, n=m.n, direction=m.direction,
            status=verdict.status, bound=verdict.bound.value if verdict.bound else None, write=verdict.write,
            message=verdict.message, provenance=provenance, interval=list(m.interval) if m.interval else None,
            provenance_changes={k: list(v) for k, v in verdict.provenance_changes.items()}, details=m.details,
        )
        request.node.user_properties.append((PROPERTY, record.to_dict()))
        if verdict.provenance_changes:
            fields = ", ".join(f"{k}: {a} -> {b}" for k, (a, b) in verdict.provenance_changes.items())
            warnings.warn(T2IProvenanceWarning(f"gate {m.gate} was set under other settings ({fields})"), stacklevel=2)
        if verdict.failed:
            pytest.fail(verdict.message, pytrace=False)
        return m

    return check


class Reporter:
    """What a test shows people besides its verdict: summary tables and attached artifacts."""

    def __init__(self, request: pytest.FixtureRequest, artifacts):
        self._node = request.node
        self.artifacts = artifacts

    def section(self, title: str, lines: list[str]) -> None:
        """A block printed in the terminal summary under ``title`` (the last one per title wins)."""
        self._node.user_properties.append((SECTION, {"title": title, "lines": [str(x) for x in lines]}))

    def json(self, name: str, obj) -> None:
        self.artifacts.json(name, obj)

    def png(self, name: str, data_or_figure) -> None:
        self.artifacts.png(name, data_or_figure)


@pytest.fixture
def t2i_report(request: pytest.FixtureRequest) -> Reporter:
    """Summary tables and artifacts (JSON, PNG) for the current test; attached to Allure when active."""
    from .artifacts import Artifacts

    options = request.config.stash[OPTIONS]
    allure_active = request.config.pluginmanager.hasplugin("allure_pytest") and bool(
        getattr(request.config.option, "allure_report_dir", None)
    )
    return Reporter(request, Artifacts(options.artifacts, request.node.name, allure_active))


class GateHooks:
    """Hooks that need the session state: registered per config, as pytest's junitxml does."""

    def __init__(self, config: pytest.Config, session: GateSession):
        self.config = config
        self.session = session

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call":
            for key, value in report.user_properties:
                if key == PROPERTY:
                    self.session.add(value)
                elif key == SECTION:
                    self.session.add_section(value)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:
        self.session.merge_cache_stats(getattr(node, "workeroutput", {}).get("t2i_cache") or {})

    def pytest_sessionfinish(self) -> None:
        complete = not self.config.getoption("keyword") and not self.config.getoption("markexpr")
        self.session.finish(write_files=not _is_worker(self.config), complete_run=complete)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        lines = GateReport(self.session).lines()
        if lines:
            terminalreporter.write_sep("=", "t2i-fairness gates")
            for line in lines:
                terminalreporter.write_line(line)
