"""The pytest plugin (entry point ``t2i_fairness``): options, one-line hooks, and the suite's fixtures.

Every ``--t2i-*`` option is registered here, so ``pytest --help`` and ``-p no:t2i_fairness``
work everywhere; the fixtures live in ``t2i_fairness.fixtures`` and the logic in plain modules
(:mod:`~t2i_fairness.spine.options`, :mod:`t2i_fairness.gating`, :mod:`t2i_fairness.report`,
:mod:`t2i_fairness.families`).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from t2i_fairness.errors import T2IProvenanceWarning, T2ISmallSampleWarning  # noqa: F401  (public names)
from t2i_fairness.families import FAMILIES, family_of_module, value_ranges
from t2i_fairness.gating.outcome import first_line
from t2i_fairness.gating.session import ARTIFACT, PROPERTY, SECTION, GateSession
from t2i_fairness.gating.ranges import bounds_outside
from t2i_fairness.gating.thresholds import ThresholdFile, ThresholdFileError
from t2i_fairness.runstate import (  # noqa: F401  (the stash keys and helpers; public names of this module)
    BASELINES, BENCHES, CLOCKS, FAMILY_SIZE, LEVEL, OPTIONS, ROLES, SESSION, STARTED, THRESHOLDS, _RUNNING, fatal, gate_id_of,
    is_worker, progress_for, release_models,
)
from t2i_fairness.spine.options import CORE_OPTIONS, T2IOptions, add_options, resolve_options  # noqa: F401

try:  # pytest's JUnit writer, which report/junit.py makes tell the run's outcome
    from _pytest.junitxml import xml_key as junit_xml_key
except ImportError:  # pragma: no cover  (another pytest: the XML is left as pytest writes it)
    junit_xml_key = None

pytest_plugins = ("t2i_fairness.fixtures.core", "t2i_fairness.fixtures.studies")



def all_options():
    """The core options and every registered family's, in registration order."""
    return tuple(CORE_OPTIONS) + tuple(o for f in FAMILIES for o in f.options)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("t2i-fairness", "text-to-image fairness gates")
    add_options(group.addoption, all_options())


AUTO_WORKERS = pytest.StashKey[str]()  # what ``-n auto`` decided, for the report header


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` gives one worker per accelerator (xdist's CPU count when there is none): workers
    sharing a GPU contend for it (docs/performance.md), and the header says why.
    """
    from t2i_fairness.base.devices import accelerator_count

    count = accelerator_count()
    if count == 1:
        config.stash[AUTO_WORKERS] = ("t2i-fairness: -n auto: 1 GPU, so 1 worker (workers sharing one GPU "
                                      "contend for it; more workers are not faster on one GPU)")
    elif count:
        config.stash[AUTO_WORKERS] = f"t2i-fairness: -n auto: {count} GPUs, so {count} workers, one per GPU"
    return count or None


def pytest_configure(config: pytest.Config) -> None:
    import time

    from t2i_fairness.errors import OptionError
    from t2i_fairness.report.labels import Vocabulary, marker_lines

    from t2i_fairness.base.devices import pin_worker, pins_workers

    config.stash[STARTED] = time.perf_counter()
    if is_worker(config) and pins_workers(config.getoption("--t2i-device") or "auto"):
        pin_worker(config.workerinput["workerid"])  # type: ignore[attr-defined]  # before CUDA initialises
    xml = getattr(config.option, "xmlpath", None)
    if xml and not is_worker(config):  # before anything can refuse the run: an earlier JUnit never looks current
        from t2i_fairness.report.stale import mark_stale

        mark_stale(junit=os.path.normpath(os.path.abspath(os.path.expanduser(os.path.expandvars(xml)))))
    try:
        options = resolve_options(config.getoption, rootdir=defaults_root(config),
                                  invocation_dir=config.invocation_params.dir, families=FAMILIES)
        labels = [f.labels(options, options.family(f.name)) for f in FAMILIES if f.labels]
    except OptionError as exc:
        raise pytest.UsageError(str(exc)) from None
    from t2i_fairness.generators import add_factory_paths

    add_factory_paths([options.model, options.baseline_model], [config.rootpath, config.invocation_params.dir])
    try:
        config.stash[THRESHOLDS] = ThresholdFile.load(options.thresholds)
    except ThresholdFileError as exc:
        raise pytest.UsageError(f"--t2i-thresholds: {exc}") from None
    refused = bounds_outside(config.stash[THRESHOLDS], value_ranges())
    if refused:  # a bound no value of its indicator can meet: a typo, refused before anything runs
        raise pytest.UsageError("--t2i-thresholds: " + "\n".join(refused))
    config.stash[OPTIONS] = options
    config.stash[BASELINES] = {}
    session = GateSession(options.thresholds)
    session.vocabulary = Vocabulary.from_tokens(labels)
    for line in marker_lines(session.vocabulary, [(f.name, f.title) for f in FAMILIES]):
        config.addinivalue_line("markers", line)
    config.stash[SESSION] = session
    config.pluginmanager.register(GateHooks(config, session), "t2i-fairness-gates")
    if config.option.pyargs:
        config.args[:] = [suite_argument(a) for a in config.args]
    _catch_sigterm(config)


PREVIOUS_SIGTERM = pytest.StashKey[object]()
SIGTERM_REASON = "SIGTERM (a termination signal: a CI job's timeout, kill)"


def _catch_sigterm(config: pytest.Config) -> None:
    """SIGTERM ends the run as Ctrl-C does (:class:`~t2i_fairness.errors.Terminated`): JUnit, run.json, the
    report and Allure say interrupted. Only where no one else handles it, from the main thread; a second
    SIGTERM ends the process at once."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        return

    def terminated(signum, frame):
        from t2i_fairness.errors import Terminated

        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        raise Terminated(SIGTERM_REASON)

    config.stash[PREVIOUS_SIGTERM] = signal.signal(signal.SIGTERM, terminated)


def pytest_unconfigure(config: pytest.Config) -> None:
    previous = config.stash.get(PREVIOUS_SIGTERM, None)
    if previous is not None:
        import signal

        signal.signal(signal.SIGTERM, previous)


def interrupt_reason(exc: BaseException) -> str:
    """How the outputs name an interruption: ``pytest.exit: ...``, SIGTERM, or Ctrl-C."""
    from t2i_fairness.errors import Terminated

    if isinstance(exc, pytest.exit.Exception):
        return f"pytest.exit: {first_line(exc)}"
    if isinstance(exc, Terminated):
        return SIGTERM_REASON
    return f"{type(exc).__name__} (Ctrl-C or SIGINT)"


SUITE = "t2i_fairness.fairness_tests"


def suite_argument(arg: str) -> str:
    """``--pyargs t2i_fairness`` names the suite's package when it does not lie inside the package's folder.

    An editable install maps ``t2i_fairness.fairness_tests`` onto the checkout's ``fairness_tests/``,
    outside ``plugin/t2i_fairness/``, so pytest, collecting that folder, found no test; the wheel has it
    inside. Any other argument is returned as it is.
    """
    if arg.strip() != "t2i_fairness":
        return arg
    import importlib.util

    package, suite = importlib.util.find_spec("t2i_fairness"), importlib.util.find_spec(SUITE)
    if package is None or suite is None or not package.submodule_search_locations or not suite.submodule_search_locations:
        return arg
    inside = Path(package.submodule_search_locations[0]).resolve() / "fairness_tests"
    return arg if Path(suite.submodule_search_locations[0]).resolve() == inside else SUITE


def defaults_root(config: pytest.Config) -> Path:
    """Where the relative defaults live (``thresholds/<model>.yaml``, ``.t2i-cache``, ``t2i-artifacts``).

    pytest's rootdir, decided again from the arguments as finally parsed: pytest picks it before this
    plugin's options are known and may take an option's value (``--t2i-cache-dir /x/.t2i-cache``)
    for a test path. ``--rootdir`` decides, as for pytest.
    """
    if config.option.rootdir:
        return config.rootpath
    try:
        from _pytest.config.findpaths import determine_setup

        root = determine_setup(inifile=config.option.inifilename, override_ini=config.option.override_ini,
                               args=[str(a) for a in getattr(config.option, "file_or_dir", None) or []],
                               rootdir_cmd_arg=None, invocation_dir=config.invocation_params.dir)[0]
    except Exception:  # noqa: BLE001  (another pytest's signature, an unreadable ini: pytest's own rootdir)
        return config.rootpath
    return Path(root)


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function):
    """A gate's verdict, raised by the gating layer as the package's own outcome, becomes pytest's."""
    __tracebackhide__ = True
    from t2i_fairness.errors import GateFailed, GateSkipped

    try:
        return (yield)
    except GateFailed as exc:
        raise pytest.fail.Exception(str(exc), pytrace=False) from None
    except GateSkipped as exc:
        raise pytest.skip.Exception(str(exc), _use_item_location=True) from None


def pytest_report_header(config: pytest.Config) -> list[str]:
    o = config.stash[OPTIONS]
    smoke = " (built-in smoke model with random weights: its numbers say nothing about fairness)" if o.model == "tiny" else ""
    lines = [f"t2i-fairness: model {o.model}{smoke}; preset {o.preset}; scorers {o.scorers}; {len(o.objects)} objects, "
             f"{o.images_per_prompt} images/prompt, seed {o.seed}; thresholds {os.path.abspath(o.thresholds)}",
             f"t2i-fairness: design {o.design}"]
    root = defaults_root(config)
    if root != config.rootpath:
        lines.append(f"t2i-fairness: pytest's rootdir {config.rootpath} is not that of this command's test paths, "
                     f"{root} (an option's value after a space, as in --t2i-cache-dir /x, is a test path to pytest "
                     f"when it picks the rootdir); the thresholds, cache and artifacts defaults are under {root} "
                     "(--rootdir decides otherwise)")
    lines += [f.header(o, o.family(f.name)) for f in FAMILIES if f.header]
    lines.append(config.stash.get(AUTO_WORKERS, ""))
    from t2i_fairness.report.changes import version_lines

    lines += version_lines(root / "requirements.lock", config.stash[THRESHOLDS])  # before anything is generated
    return [line for line in lines if line]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Each family parametrizes its own gate tests; with ``--t2i-baseline-model`` every test that uses
    ``t2i`` runs for the baseline, then the candidate."""
    from t2i_fairness.errors import OptionError

    options = metafunc.config.stash[OPTIONS]
    own = family_of_module(getattr(metafunc.module, "__name__", ""))
    # A suite module gets its own family's parameters; any other test (a team's own) the first
    # registered family's that knows its arguments (indic_language, cis_k, ...).
    names = set(metafunc.fixturenames)
    try:
        for family in ([own] if own is not None else FAMILIES):
            params = family.parameters(names, options, options.family(family.name)) if family.parameters else []
            for p in params:
                metafunc.parametrize(list(p.argnames), p.values, ids=p.ids)
            if params:
                break
    except OptionError as exc:
        raise pytest.UsageError(str(exc)) from None
    if options.baseline_model and "t2i" in metafunc.fixturenames:
        metafunc.parametrize("t2i", ROLES, indirect=True, scope="session", ids=ROLES)


@pytest.hookimpl(tryfirst=True)  # before -k/-m deselect, so that -m sees the markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with its family, regions, languages and template (``-m "region_africa and
    family_dig_in"``); keep a test's baseline and candidate runs together (same xdist worker with
    --dist loadgroup)."""
    from t2i_fairness.report.labels import gate_labels, markers_of

    vocabulary = config.stash[SESSION].vocabulary
    for item in items:
        family = family_of_module(getattr(getattr(item, "module", None), "__name__", "") or "")
        params = getattr(getattr(item, "callspec", None), "params", None)
        for name in markers_of(gate_labels(item.name, params, vocabulary), family.name if family else None):
            item.add_marker(name)
    if config.stash[OPTIONS].baseline_model:
        for item in items:
            if "t2i" in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.xdist_group(gate_id_of(item.name)))


# -- the stash keys and helpers the fixtures share live in t2i_fairness.runstate ----------------------


class GateHooks:
    """Hooks that need the session state: registered per config, as pytest's junitxml does."""

    def __init__(self, config: pytest.Config, session: GateSession):
        self.config = config
        self.session = session
        self.report_path = None
        self.deselected: list[str] = []
        self.fatal: str | None = None  # under xdist: the first worker's fatal() message
        options = config.stash[OPTIONS]
        self.recorder = None  # the run history (the controller writes it, as it writes run.json)
        if options.history is not None and not is_worker(config):
            from t2i_fairness.history.record import Recorder

            self.recorder = Recorder(options.history, options, warn=session.notes.append)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        _RUNNING.append(session)
        if not is_worker(self.config):  # what this run writes at its end never shows an earlier run's result
            from t2i_fairness.report.html import REPORT_FILE
            from t2i_fairness.report.stale import mark_stale

            options, allure = self.config.stash[OPTIONS], getattr(self.config.option, "allure_report_dir", None)
            mark_stale(allure=Path(allure) / "environment.properties" if allure else None,
                       report=Path(options.report) / REPORT_FILE if options.report is not None else None,
                       run_json=self.run_json() if options.report is not None else None)

    def run_json(self) -> Path:
        return Path(self.config.stash[OPTIONS].artifacts) / "run.json"

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids) -> None:
        """Under xdist: a run of the suite's gates writes run.json at its end (the controller collects nothing)."""
        if any(family_of_module(Path(i.split("::", 1)[0]).stem) for i in ids[:1000]):
            from t2i_fairness.report.stale import mark_stale

            mark_stale(run_json=self.run_json())

    # -- what pytest decides (the reports follow it: gating/outcome.py) ----------------------------------
    def pytest_deselected(self, items) -> None:
        self.deselected += [item.name for item in items]

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        sel = self.session.outcome.selection
        sel.selected = len(session.items)
        sel.collected = sel.selected + len(self.deselected)
        sel.how, sel.partial_args = selectors(self.config)
        sel.functions = sorted({split_function(item.name) for item in session.items} | {split_function(n) for n in self.deselected})
        gates = [item for item in session.items if "gate" in getattr(item, "fixturenames", ())]
        sel.gate_tests = len(gates)
        # the gates this run selected, after -k/-m: the m of the adjustment across the run (every worker
        # collects the same items, so each counts the same; a baseline and its candidate are one gate)
        self.config.stash[FAMILY_SIZE] = len({gate_id_of(item.name) for item in gates}) or 1
        from t2i_fairness.metrics.decisions import GateLevel

        self.config.stash[LEVEL] = GateLevel.of(self.config.stash[OPTIONS], self.config.stash[FAMILY_SIZE])
        if is_worker(self.config):
            self.config.workeroutput["t2i_selection"] = {  # type: ignore[attr-defined]
                "collected": sel.collected, "selected": sel.selected, "functions": sel.functions,
                "gate_tests": sel.gate_tests}
        elif self.config.stash[OPTIONS].progress and session.items and not self.config.option.collectonly:
            self.estimate(session.items)
        if gates and not is_worker(self.config) and not self.config.option.collectonly:
            from t2i_fairness.report.stale import mark_stale  # a gate run writes run.json at its end

            mark_stale(run_json=self.run_json())

    def estimate(self, items) -> None:
        """The header's expected generation time (from the stored rate), and the progress lines' clocks."""
        from t2i_fairness.distributed.planner import run_header

        lines, self.config.stash[CLOCKS] = run_header(items, self.config.stash[OPTIONS])
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        for line in lines if reporter is not None else ():
            reporter.write_line(line)

    def pytest_collectreport(self, report) -> None:
        if report.failed:
            self.session.outcome.add(report.nodeid or "<collection>", "collect", "failed", failure_message(report))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        path, line = (report.location[0], report.location[1] + 1) if report.location and report.location[1] is not None else (None, None)
        self.session.outcome.add(report.nodeid, report.when, report.outcome, failure_message(report),
                                 xfail=hasattr(report, "wasxfail"), path=path, line=line)
        if report.when in ("call", "teardown"):  # teardown: what a fixture's finaliser attached (evidence)
            for key, value in report.user_properties:
                if key == PROPERTY and report.when == "call":
                    self.session.add(value)
                    if self.recorder is not None:  # as it arrives: a run killed later keeps its gates so far
                        self.recorder.gate(self.session.records[-1].to_dict())
                elif key == SECTION:
                    self.session.add_section(value)
                elif key == ARTIFACT:
                    self.session.add_artifact(value)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        """A full disk is one line (the folder, its free space, what was kept), and the run stops: every
        later write would fail the same way."""
        from t2i_fairness.base.files import disk_full_in

        outcome = yield
        full = disk_full_in(call.excinfo.value) if call.excinfo is not None else None
        if full is not None:  # ours, behind another error, or a library's bare ENOSPC
            report = outcome.get_result()
            report.longrepr = f"t2i-fairness: {full}"
            item.session.shouldfail = f"disk full: {full.folder}"

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        """A test an interruption cut off (SIGINT, ``pytest.exit``) is ``broken`` in Allure, not ``passed``."""
        outcome = yield
        excinfo = outcome.excinfo
        if excinfo is not None and issubclass(excinfo[0], (KeyboardInterrupt, pytest.exit.Exception)):
            from t2i_fairness.report.labels import allure_active, allure_interrupted

            if allure_active(self.config):
                allure_interrupted(self.config, item.nodeid, interrupt_reason(excinfo[1]))

    def pytest_keyboard_interrupt(self, excinfo) -> None:
        if self.fatal:  # xdist stopped the run on a worker's fatal(): report it as the run without xdist does
            self.session.outcome.interrupted = f"pytest.exit: {self.fatal}"
        else:  # pytest.exit(reason) (a fatal setup problem, or the user's own), SIGTERM, Ctrl-C
            self.session.outcome.interrupted = interrupt_reason(excinfo.value)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item, nextitem):
        """After a test's teardown: release the models no test still to run needs."""
        yield
        release_models(item, nextitem)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:
        out = getattr(node, "workeroutput", {})
        self.session.memory.extend(out.get("t2i_memory") or [])
        self.fatal = self.fatal or out.get("t2i_fatal")
        self.session.merge_cache_stats(out.get("t2i_cache") or {})
        self.session.outcome.selection.merge(out.get("t2i_selection") or {})
        if out.get("t2i_scorer_check") and self.session.scorer_check is None:  # the first worker's (they all check)
            from t2i_fairness.spine.scorer_check import ScorerCheck

            self.session.scorer_check = ScorerCheck.from_transfer(out["t2i_scorer_check"])

    @pytest.hookimpl(tryfirst=True)  # before pytest's JUnit writer writes its file (report/junit.py marks it)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if session in _RUNNING:
            _RUNNING.remove(session)
        if self.fatal and not is_worker(self.config):  # a worker's fatal(): exit code 4, as without xdist
            session.exitstatus = exitstatus = pytest.ExitCode.USAGE_ERROR
        outcome = self.session.outcome
        outcome.selection.how, outcome.selection.partial_args = selectors(self.config)  # (xdist's controller collects nothing)
        stopped = session.shouldfail or session.shouldstop
        outcome.finish(int(exitstatus), stopped=str(stopped) if stopped else None)
        # The unused-gate check needs a run that selected the whole suite and reached every test.
        complete = (outcome.selection.whole and not stopped and not outcome.interrupted
                    and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED))
        functions = outcome.selection.functions if outcome.selection.partial_args else None
        ran = {gate_id_of(nodeid.rsplit("::", 1)[-1]) for nodeid in outcome.tests}
        options = self.config.stash[OPTIONS]
        self.session.finish(write_files=not is_worker(self.config), complete_run=complete, options=options,
                            functions=functions, tests=ran, thresholds=self.config.stash.get(THRESHOLDS, None))
        if is_worker(self.config):
            return
        if self.session.write_error and session.exitstatus == pytest.ExitCode.OK:  # asked-for bounds not written
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            outcome.finish(int(session.exitstatus))
        if self.session.escalated:  # the step-down across the run rejected more gates than each run-time test
            outcome.escalated = list(self.session.escalated)
            if session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
                outcome.finish(int(session.exitstatus))
        if self.recorder is not None:  # before the outputs: run.json and the report show the history
            from t2i_fairness.history.record import finish_history

            finish_history(self.recorder, self.session, int(session.exitstatus))
        from t2i_fairness.report.ci import relative, write_run_outputs

        xml = self.config.stash.get(junit_xml_key, None) if junit_xml_key is not None else None
        if xml is not None:
            from t2i_fairness.report.junit import mark_run

            mark_run(xml, self.session, relative(self.session.thresholds_path, self.config.rootpath))

        write_run_outputs(self.session, options, self.config.rootpath, self.config.stash[THRESHOLDS],
                          allure_dir=getattr(self.config.option, "allure_report_dir", None))
        if options.report is not None:
            from t2i_fairness.report.html import write_run_report

            self.report_path = write_run_report(options, self.session)
        if self.session.write_error and session.exitstatus == pytest.ExitCode.OK:  # an output a full disk refused
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            outcome.finish(int(session.exitstatus))
        if options.mlflow and not self.config.option.collectonly:  # after every local output: a failing server loses nothing
            from t2i_fairness.history.mlflow_log import log_run

            self.session.notes.append(log_run(options.mlflow, options, self.session, self.report_path))

    def pytest_terminal_summary(self, terminalreporter) -> None:
        from t2i_fairness.report.ci import github_annotations
        from t2i_fairness.report.terminal import GateReport

        lines = GateReport(self.session).lines() + ([f"HTML report: {self.report_path}"] if self.report_path else [])
        if lines:
            terminalreporter.write_sep("=", "t2i-fairness gates")
            for line in lines:
                terminalreporter.write_line(line)
        if os.environ.get("GITHUB_ACTIONS") == "true" and not is_worker(self.config) and self.session.records:
            for line in github_annotations(self.session, self.config.rootpath, self.config.stash[THRESHOLDS].lines):
                terminalreporter.write_line(line)


def selectors(config: pytest.Config) -> tuple[list[str], bool]:
    """The command line's test selectors, as a person typed them, and whether file or node-id
    arguments named part of the suite."""
    how = []
    if config.getoption("keyword", None):
        how.append(f"-k {config.getoption('keyword')}")
    if config.getoption("markexpr", None):
        how.append(f"-m {config.getoption('markexpr')}")
    if config.getoption("deselect", None):
        how.append(f"--deselect ({len(config.getoption('deselect'))})")
    for flag, name in (("lf", "--lf"), ("failedfirst", "--ff"), ("stepwise", "--sw"), ("newfirst", None)):
        if name and config.getoption(flag, False):
            how.append(name)
    args = [str(a) for a in config.args]
    node_ids = [a for a in args if "::" in a]
    if node_ids:
        how.append(f"{len(node_ids)} node id{'s' if len(node_ids) != 1 else ''}")
    partial = bool(node_ids) or any(a.endswith(".py") for a in args)
    return how, partial


def split_function(name: str) -> str:
    """A test's function name (its parameters removed): ``test_cis[k1]`` -> ``test_cis``."""
    return name.split("[", 1)[0]


def failure_message(report) -> str:
    """The one line that says what went wrong (the skip reason for a skip)."""
    longrepr = report.longrepr
    if longrepr is None:
        return ""
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # a skip: (path, line, "Skipped: reason")
        return str(longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None and getattr(crash, "message", None):
        return str(crash.message)
    return first_line(str(longrepr))
