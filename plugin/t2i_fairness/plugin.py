"""The pytest plugin (entry point ``t2i_fairness``): options, one-line hooks, and the suite's fixtures.

Every ``--t2i-*`` option is registered here (the core ones and each registered family's), so
``pytest --help`` and ``-p no:t2i_fairness`` work everywhere. The fixtures live in
``t2i_fairness.fixtures`` (the repository's top-level ``fixtures/``); the logic lives in plain
modules: options in :mod:`~t2i_fairness.spine.options`, gating in :mod:`t2i_fairness.gating`,
reports in :mod:`t2i_fairness.report`, each paper in :mod:`t2i_fairness.families`.
"""

from __future__ import annotations

import contextlib
import sys

import pytest

from t2i_fairness.errors import T2IProvenanceWarning, T2ISmallSampleWarning  # noqa: F401  (public names)
from t2i_fairness.families import FAMILIES, family_of_module
from t2i_fairness.gating.session import ARTIFACT, PROPERTY, SECTION, GateSession
from t2i_fairness.gating.thresholds import ThresholdFile, ThresholdFileError
from t2i_fairness.spine.options import CORE_OPTIONS, T2IOptions, add_options, resolve_options

pytest_plugins = ("t2i_fairness.fixtures.core", "t2i_fairness.fixtures.studies")

OPTIONS = pytest.StashKey[T2IOptions]()
SESSION = pytest.StashKey[GateSession]()
THRESHOLDS = pytest.StashKey[ThresholdFile]()
BASELINES = pytest.StashKey[dict]()  # gate id -> the baseline's measurement (same process)
FAMILY_SIZE = pytest.StashKey[int]()  # gates selected in this run: the m of the multiplicity adjustment
ROLES = ("baseline", "candidate")


def all_options():
    """The core options and every registered family's, in registration order."""
    return tuple(CORE_OPTIONS) + tuple(o for f in FAMILIES for o in f.options)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("t2i-fairness", "text-to-image fairness gates")
    add_options(group.addoption, all_options())


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` gives one worker per accelerator (xdist's CPU count when there is none)."""
    from t2i_fairness.spine.devices import accelerator_count

    return accelerator_count() or None


def pytest_configure(config: pytest.Config) -> None:
    from t2i_fairness.errors import OptionError
    from t2i_fairness.report.labels import Vocabulary

    if is_worker(config) and config.getoption("--t2i-device") in ("auto", "cuda"):
        from t2i_fairness.spine.devices import pin_worker

        pin_worker(config.workerinput["workerid"])  # type: ignore[attr-defined]  # before CUDA initialises
    try:
        options = resolve_options(config.getoption, rootdir=config.rootpath,
                                  invocation_dir=config.invocation_params.dir, families=FAMILIES)
        labels = [f.labels(options, options.family(f.name)) for f in FAMILIES if f.labels]
    except OptionError as exc:
        raise pytest.UsageError(str(exc)) from None
    try:
        config.stash[THRESHOLDS] = ThresholdFile.load(options.thresholds)
    except ThresholdFileError as exc:
        raise pytest.UsageError(f"--t2i-thresholds: {exc}") from None
    config.stash[OPTIONS] = options
    config.stash[BASELINES] = {}
    session = GateSession(options.thresholds)
    session.vocabulary = Vocabulary.from_tokens(labels)
    config.stash[SESSION] = session
    config.pluginmanager.register(GateHooks(config, session), "t2i-fairness-gates")


def pytest_report_header(config: pytest.Config) -> list[str]:
    o = config.stash[OPTIONS]
    smoke = " (built-in smoke model with random weights: its numbers say nothing about fairness)" if o.model == "tiny" else ""
    lines = [f"t2i-fairness: model {o.model}{smoke}; preset {o.preset}; scorers {o.scorers}; {len(o.objects)} objects, "
             f"{o.images_per_prompt} images/prompt, seed {o.seed}; thresholds {o.thresholds}"]
    lines += [f.header(o, o.family(f.name)) for f in FAMILIES if f.header]
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


@pytest.hookimpl(trylast=True)  # after -k/-m deselection: count the gates this run selected
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Count the run's gates (the adjustment's m: every worker collects the same items) and keep a
    test's baseline and candidate runs together (same xdist worker with --dist loadgroup)."""
    gates = [item for item in items if "gate" in getattr(item, "fixturenames", ())]
    config.stash[FAMILY_SIZE] = len({gate_id_of(item.name) for item in gates}) or 1
    if config.stash[OPTIONS].baseline_model:
        for item in items:
            if "t2i" in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.xdist_group(gate_id_of(item.name)))


# -- helpers the fixtures share ---------------------------------------------------------------------


def gate_id_of(name: str) -> str:
    """The gate id of a test name: the baseline/candidate part of its parameters removed.

    Example:
        >>> gate_id_of("test_cis[candidate-k1]"), gate_id_of("test_cis_order_invariance[baseline]")
        ('test_cis[k1]', 'test_cis_order_invariance')
    """
    if "[" not in name:
        return name
    base, _, params = name.partition("[")
    tokens = [t for t in params[:-1].split("-") if t not in ROLES]
    return f"{base}[{'-'.join(tokens)}]" if tokens else base


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def fatal(message: str) -> None:
    """End the session with one clear message (a model that cannot be loaded, a bad device)."""
    pytest.exit(f"t2i-fairness: {message}", returncode=pytest.ExitCode.USAGE_ERROR)


def progress_for(config: pytest.Config):
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
        self.session.finish(write_files=not is_worker(self.config), complete_run=complete,
                            options=self.config.stash[OPTIONS])
        if self.session.escalated and not is_worker(self.config) and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED  # the step-down across the run rejected more gates
        options = self.config.stash[OPTIONS]
        if self.session.records and not is_worker(self.config):
            from t2i_fairness.report.results import write_results

            write_results(self.session, options.artifacts, session.exitstatus)
        if options.report is not None and not is_worker(self.config):
            from t2i_fairness.report.html import write_run_report

            self.report_path = write_run_report(options, self.session)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        from t2i_fairness.report.terminal import GateReport

        lines = GateReport(self.session).lines() + ([f"HTML report: {self.report_path}"] if self.report_path else [])
        if lines:
            terminalreporter.write_sep("=", "t2i-fairness gates")
            for line in lines:
                terminalreporter.write_line(line)
