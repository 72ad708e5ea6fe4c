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

from t2i_fairness.gating.verdicts import Measurement, ThresholdFile, ThresholdFileError, evaluate
from t2i_fairness.spine.options import T2IOptions, add_options, resolve_options
from t2i_fairness.gating.session import ARTIFACT, PROPERTY, SECTION, GateReport, GateRecord, GateSession

OPTIONS = pytest.StashKey[T2IOptions]()
SESSION = pytest.StashKey[GateSession]()
THRESHOLDS = pytest.StashKey[ThresholdFile]()
BASELINES = pytest.StashKey[dict]()  # gate id -> the baseline's measurement (same process)
ROLES = ("baseline", "candidate")


class T2IProvenanceWarning(UserWarning):
    """A gate's bound was set under other settings (model, scorers, sample sizes, versions, device)."""


class T2ISmallSampleWarning(UserWarning):
    """A figure rests on too few values to be stable (a percentile of few images, a tiny group)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` gives one worker per accelerator (xdist's CPU count when there is none)."""
    from t2i_fairness.spine.devices import accelerator_count

    return accelerator_count() or None


def pytest_configure(config: pytest.Config) -> None:
    if _is_worker(config) and config.getoption("--t2i-device") in ("auto", "cuda"):
        from t2i_fairness.spine.devices import pin_worker

        pin_worker(config.workerinput["workerid"])  # type: ignore[attr-defined]  # before CUDA initialises
    options = resolve_options(config)
    try:
        config.stash[THRESHOLDS] = ThresholdFile.load(options.thresholds)
    except ThresholdFileError as exc:
        raise pytest.UsageError(f"--t2i-thresholds: {exc}") from None
    config.stash[OPTIONS] = options
    config.stash[BASELINES] = {}
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
    from t2i_fairness.spine.generation import tqdm_progress

    @contextlib.contextmanager
    def progress(total: int, desc: str):
        capman = config.pluginmanager.getplugin("capturemanager")
        with (capman.global_and_fixture_disabled() if capman else contextlib.nullcontext()):
            sys.stderr.write("\n")
            with tqdm_progress(total, desc) as advance:
                yield advance

    return progress


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """With ``--t2i-baseline-model`` every test that uses ``t2i`` runs for the baseline, then the candidate."""
    if metafunc.config.stash[OPTIONS].baseline_model and "t2i" in metafunc.fixturenames:
        metafunc.parametrize("t2i", ROLES, indirect=True, scope="session", ids=ROLES)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep a test's baseline and candidate runs together (same xdist worker with --dist loadgroup)."""
    if config.stash[OPTIONS].baseline_model:
        for item in items:
            if "t2i" in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.xdist_group(_gate_id(item.name)))


def _gate_id(name: str) -> str:
    """The gate id of a test name: the baseline/candidate part of its parameters removed."""
    if "[" not in name:
        return name
    base, _, params = name.partition("[")
    tokens = [t for t in params[:-1].split("-") if t not in ROLES]
    return f"{base}[{'-'.join(tokens)}]" if tokens else base


@pytest.fixture(scope="session")
def t2i(request: pytest.FixtureRequest, pytestconfig: pytest.Config):
    """The session's :class:`~t2i_fairness.spine.workbench.Workbench`: generator, cache and scorers.

    Under ``--t2i-baseline-model`` it is parametrized: ``baseline`` (that model) and ``candidate``.
    """
    from t2i_fairness.spine.workbench import Workbench

    def fatal(message: str) -> None:
        pytest.exit(f"t2i-fairness: {message}", returncode=pytest.ExitCode.USAGE_ERROR)

    options = pytestconfig.stash[OPTIONS]
    role = getattr(request, "param", "candidate")
    if role == "baseline":
        seed = options.seed if options.baseline_seed is None else options.baseline_seed
        options = dataclasses.replace(options, model=options.baseline_model, seed=seed)
    try:
        bench = Workbench(options, _progress_for(pytestconfig) if options.progress and not _is_worker(pytestconfig) else None, fatal)
    except Exception as exc:  # a bad model spec or cache folder ends the session with one clear message
        from t2i_fairness.generators import ModelLoadError

        if isinstance(exc, (ModelLoadError, OSError)):
            fatal(str(exc))
        raise
    bench.role = role
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
    from t2i_fairness.report.labels import allure_active, allure_label, allure_measurement

    allure_on = allure_active(config)
    if allure_on:
        allure_label(request.node, options)

    def check(value: float, *, n: int, higher_is_better: bool = True, interval=None,
              details: dict[str, Any] | None = None, name: str | None = None,
              resample: Callable[[Any], float] | None = None, units: int | None = None, strata=None,
              provenance: dict[str, Any] | None = None) -> Measurement:
        """``resample(indices) -> value`` with ``units`` (and optional ``strata`` labels) gives a seeded
        percentile-bootstrap interval over those units (``--t2i-bootstrap`` resamples). ``provenance``
        adds what this suite's number also depends on (a prompt file digest, a model fallback)."""
        __tracebackhide__ = True
        gate_id = name or _gate_id(request.node.name)
        seed = _bootstrap_seed(gate_id, options.seed)
        if interval is None and resample is not None and options.bootstrap > 0 and (units or 0) > 0:
            from t2i_fairness.metrics.stats import index_bootstrap

            interval = index_bootstrap(resample, int(units), strata=strata, n_resamples=options.bootstrap,
                                       confidence=options.confidence, seed=seed)
        m = Measurement(gate_id, float(value), int(n), "min" if higher_is_better else "max",
                        tuple(interval) if interval is not None else None, dict(details or {}))
        provenance = {**t2i.provenance(), **(provenance or {})}
        role = getattr(t2i, "role", "candidate")
        if role == "baseline":
            config.stash[BASELINES][gate_id] = (m, resample, units, strata)
            request.node.user_properties.append((PROPERTY, GateRecord(
                gate=m.gate, nodeid=request.node.nodeid, value=m.value, n=m.n, direction=m.direction, status="baseline",
                bound=None, write=None, message=f"{m.gate}: baseline {options.baseline_model} measured {m.value:.4f}",
                provenance=provenance, interval=list(m.interval) if m.interval else None, details=m.details).to_dict()))
            return m
        comparison = None
        if options.baseline_model:
            comparison = _compare_with_baseline(m, config.stash[BASELINES].get(gate_id), resample, units, strata, options, seed)
            m.details["baseline"] = comparison
        verdict = evaluate(m, thresholds, provenance, update=options.update_thresholds,
                           allow_loosen=options.allow_loosen, mode=options.gate_mode)
        if comparison is not None and comparison.get("failed") and not verdict.failed:
            verdict.status, verdict.message = "fail", f"{verdict.message}; {comparison['message']}"
        record = GateRecord(
            gate=m.gate, nodeid=request.node.nodeid, value=m.value, n=m.n, direction=m.direction,
            status=verdict.status, bound=verdict.bound.value if verdict.bound else None, write=verdict.write,
            message=verdict.message, provenance=provenance, interval=list(m.interval) if m.interval else None,
            provenance_changes={k: list(v) for k, v in verdict.provenance_changes.items()}, details=m.details,
        )
        request.node.user_properties.append((PROPERTY, record.to_dict()))
        if allure_on:
            allure_measurement(record.to_dict())
        if verdict.provenance_changes:
            fields = ", ".join(f"{k}: {a} -> {b}" for k, (a, b) in verdict.provenance_changes.items())
            warnings.warn(T2IProvenanceWarning(f"gate {m.gate} was set under other settings ({fields})"), stacklevel=2)
        if verdict.failed:
            pytest.fail(verdict.message, pytrace=False)
        return m

    def undefined(reason: str, name: str | None = None) -> None:
        """An indicator that cannot be computed here: skip while the gate has no bound, fail once it has one."""
        __tracebackhide__ = True
        gate_id = name or request.node.name
        if gate_id in thresholds.gates:
            pytest.fail(f"{gate_id}: {reason}; the gate has a bound in {thresholds.path}, so it cannot pass", pytrace=False)
        pytest.skip(reason)

    check.undefined = undefined  # type: ignore[attr-defined]
    return check


def _bootstrap_seed(gate_id: str, base_seed: int) -> int:
    from t2i_fairness.spine.cache import content_key

    return int(content_key(gate=gate_id, seed=base_seed)[:8], 16)


def _compare_with_baseline(m: Measurement, baseline, resample, units, strata, options, seed) -> dict:
    """``candidate >= baseline - delta`` (``<=`` plus delta for max gates), with a paired bootstrap interval.

    Both models saw the same prompts and seeds, so unit i is the same prompt/seed in both: the
    same resampled indices feed both statistics, and the interval is on their difference.
    """
    if baseline is None:
        return {"message": "baseline not measured in this process (run with -n 0 or --dist loadgroup)", "failed": False}
    b, b_resample, b_units, _ = baseline
    delta = m.value - b.value
    interval = None
    if resample is not None and b_resample is not None and units and units == b_units and options.bootstrap > 0:
        from t2i_fairness.metrics.stats import index_bootstrap

        interval = index_bootstrap(lambda idx: resample(idx) - b_resample(idx), int(units), strata=strata,
                                   n_resamples=options.bootstrap, confidence=options.confidence, seed=seed)
    allowed = options.baseline_delta
    sign = 1.0 if m.direction == "min" else -1.0  # a positive "worse" means the candidate regressed
    if options.gate_mode == "significant" and interval is not None:
        worse = -sign * (interval[1] if sign > 0 else interval[0])
    else:
        worse = -sign * delta
    failed = worse > allowed
    text = f"[{interval[0]:+.4f}, {interval[1]:+.4f}]" if interval else "(no interval)"
    message = (f"vs baseline {options.baseline_model}: {m.value:.4f} - {b.value:.4f} = {delta:+.4f} {text}, "
               f"allowed {'drop' if sign > 0 else 'rise'} {allowed:g}" + (" FAILED" if failed else ""))
    return {"model": options.baseline_model, "value": b.value, "delta": delta,
            "interval": list(interval) if interval else None, "allowed": allowed, "failed": failed, "message": message}


class Reporter:
    """What a test shows people besides its verdict: summary tables and attached artifacts."""

    def __init__(self, request: pytest.FixtureRequest, artifacts):
        self._node = request.node
        self.artifacts = artifacts

    def section(self, title: str, lines: list[str]) -> None:
        """A block printed in the terminal summary under ``title`` (the last one per title wins)."""
        self._node.user_properties.append((SECTION, {"title": title, "lines": [str(x) for x in lines]}))

    def json(self, name: str, obj) -> None:
        self._written(self.artifacts.json(name, obj))

    def png(self, name: str, data_or_figure) -> None:
        self._written(self.artifacts.png(name, data_or_figure))

    def _written(self, path) -> None:  # the controller's HTML report inlines the files of this run
        self._node.user_properties.append((ARTIFACT, {"nodeid": self._node.nodeid, "path": f"{path.parent.name}/{path.name}"}))


@pytest.fixture
def t2i_report(request: pytest.FixtureRequest) -> Reporter:
    """Summary tables and artifacts (JSON, PNG) for the current test; attached to Allure when active."""
    from t2i_fairness.report.artifacts import Artifacts

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
        self.report_path = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call":
            for key, value in report.user_properties:
                if key == PROPERTY:
                    self.session.add(value)
                elif key == SECTION:
                    self.session.add_section(value)
                elif key == ARTIFACT:
                    self.session.add_artifact(value)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:
        self.session.merge_cache_stats(getattr(node, "workeroutput", {}).get("t2i_cache") or {})

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        # A run cut short (-x, --maxfail, pytest.exit, Ctrl-C) did not reach every gate: no "unused" report.
        stopped = bool(session.shouldfail or session.shouldstop) or exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
        complete = not self.config.getoption("keyword") and not self.config.getoption("markexpr") and not stopped
        self.session.finish(write_files=not _is_worker(self.config), complete_run=complete)
        options = self.config.stash[OPTIONS]
        if options.report is not None and not _is_worker(self.config):
            from t2i_fairness.report.html import write_run_report

            self.report_path = write_run_report(options, self.session)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        lines = GateReport(self.session).lines() + ([f"HTML report: {self.report_path}"] if self.report_path else [])
        if lines:
            terminalreporter.write_sep("=", "t2i-fairness gates")
            for line in lines:
                terminalreporter.write_line(line)
