"""The run's state shared by the plugin's hooks and the suite's fixtures: pytest stash keys and helpers.

The keys live here, below both :mod:`t2i_fairness.plugin` and ``t2i_fairness.fixtures``, so the
fixtures never import the plugin; the plugin re-exports every name.
"""

from __future__ import annotations

import contextlib
import sys

import pytest

from t2i_fairness.gating.session import GateSession
from t2i_fairness.gating.thresholds import ThresholdFile
from t2i_fairness.spine.options import T2IOptions

__all__ = ["BASELINES", "BENCHES", "CLOCKS", "FAMILY_SIZE", "LEVEL", "OPTIONS", "ROLES", "SESSION", "THRESHOLDS", "fatal",
           "gate_id_of", "is_worker", "progress_for", "release_models"]

OPTIONS = pytest.StashKey[T2IOptions]()
SESSION = pytest.StashKey[GateSession]()
THRESHOLDS = pytest.StashKey[ThresholdFile]()
BASELINES = pytest.StashKey[dict]()  # gate id -> the baseline's measurement (same process)
FAMILY_SIZE = pytest.StashKey[int]()  # gates selected in this run: the m of the multiplicity adjustment
LEVEL = pytest.StashKey["GateLevel"]()  # the run's per-gate level over those gates, made once at collection
BENCHES = pytest.StashKey[dict]()  # role -> the session's Workbench (the t2i fixture registers it)
STARTED = pytest.StashKey[float]()  # time.perf_counter() at configure: the run's whole time, for the next estimate
CLOCKS = pytest.StashKey[dict]()  # role -> spine.rates.RunClock: the run's planned images and time left (progress lines)
ROLES = ("baseline", "candidate")


def gate_id_of(name: str) -> str:
    """The gate id of a test name (``test_cis[candidate-k1]``): the baseline/candidate part removed.

    Example:
        >>> gate_id_of("test_cis[candidate-k1]"), gate_id_of("test_cis_order_invariance[baseline]")
        ('test_cis[k1]', 'test_cis_order_invariance')
    """
    if "[" not in name:
        return name
    base, _, params = name.partition("[")
    tokens = [t for t in params[:-1].split("-") if t not in ROLES]
    return f"{base}[{'-'.join(tokens)}]" if tokens else base


def is_worker(config) -> bool:
    """Whether this process is a pytest-xdist worker (its config has ``workerinput``).

    Example:
        >>> from types import SimpleNamespace
        >>> is_worker(SimpleNamespace(workerinput={"workerid": "gw0"})), is_worker(SimpleNamespace())
        (True, False)
    """
    return hasattr(config, "workerinput")


_RUNNING: list = []  # this process's pytest sessions (pytester nests them): the innermost is last


def fatal(message: str) -> None:
    """End the session with one clear message (a model that cannot be loaded, a bad device).

    An xdist worker hands the message to the controller, which ends with it and exit code 4 (as
    without xdist) instead of reporting a crashed worker.
    """
    text = f"t2i-fairness: {message}"
    for session in _RUNNING[-1:]:
        if is_worker(session.config):
            session.shouldstop = text
            session.config.workeroutput["t2i_fatal"] = text  # type: ignore[attr-defined]
    pytest.exit(text, returncode=pytest.ExitCode.USAGE_ERROR)


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


def _gate_use(item, benches: dict):
    """What a test still to run needs of the models (:class:`~t2i_fairness.spine.residency.GateUse`), or
    ``None`` for a test that uses no workbench."""
    from t2i_fairness.families import family_of_module
    from t2i_fairness.spine.residency import ALL, GateUse

    if "t2i" not in getattr(item, "fixturenames", ()):
        return None
    role = (getattr(getattr(item, "callspec", None), "params", None) or {}).get("t2i", "candidate")
    role = role if role in ROLES else "candidate"
    family = family_of_module(getattr(getattr(item, "module", None), "__name__", "") or "")
    bench = benches.get(role)
    planned = family is not None and family.needs is not None and bench is not None and bench.generated_first
    scorers = ALL if family is None or family.scorers is None else frozenset(family.scorers)
    return GateUse(role, not planned, scorers)


def release_models(item, nextitem) -> None:
    """After a test: release every model that no test still to run needs (under xdist, those after
    ``nextitem`` in the collection), so the run holds at most what one step needs.
    """
    from t2i_fairness.spine.residency import still_needed

    benches = item.config.stash.get(BENCHES, {})
    if not benches:
        return
    items = item.session.items
    start = items.index(nextitem) if nextitem is not None and nextitem in items else len(items)
    needed = still_needed(use for use in (_gate_use(it, benches) for it in items[start:]) if use is not None)
    for role, bench in benches.items():
        generates, scorers = needed.get(role, (False, frozenset()))
        bench.release(generator=not generates, keep=scorers)
