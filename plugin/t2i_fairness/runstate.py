"""The run's state shared by the plugin's hooks and the suite's fixtures: pytest stash keys and helpers.

:mod:`t2i_fairness.plugin` (hooks, options) and ``t2i_fairness.fixtures`` (the fixtures gate tests
use) both read the run's options, gate session, thresholds and baselines from the pytest config's
stash under these keys; the keys live here, one floor below both, so the fixtures never import the
plugin (the plugin loads them by name, ``pytest_plugins``). :mod:`t2i_fairness.plugin` re-exports
every name.
"""

from __future__ import annotations

import contextlib
import sys

import pytest

from t2i_fairness.gating.session import GateSession
from t2i_fairness.gating.thresholds import ThresholdFile
from t2i_fairness.spine.options import T2IOptions

__all__ = ["BASELINES", "CLOCKS", "FAMILY_SIZE", "OPTIONS", "ROLES", "SESSION", "THRESHOLDS", "fatal", "gate_id_of",
           "is_worker", "progress_for"]

OPTIONS = pytest.StashKey[T2IOptions]()
SESSION = pytest.StashKey[GateSession]()
THRESHOLDS = pytest.StashKey[ThresholdFile]()
BASELINES = pytest.StashKey[dict]()  # gate id -> the baseline's measurement (same process)
FAMILY_SIZE = pytest.StashKey[int]()  # gates selected in this run: the m of the multiplicity adjustment
CLOCKS = pytest.StashKey[dict]()  # role -> spine.rates.RunClock: the run's planned images and time left (progress lines)
ROLES = ("baseline", "candidate")


def gate_id_of(name: str) -> str:
    """The gate id of a test name: the baseline/candidate part of its parameters removed.

    Args:
        name: a test's name with its parameters, e.g. ``test_cis[candidate-k1]``.

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

    Args:
        config: the pytest config.

    Example:
        >>> from types import SimpleNamespace
        >>> is_worker(SimpleNamespace(workerinput={"workerid": "gw0"})), is_worker(SimpleNamespace())
        (True, False)
    """
    return hasattr(config, "workerinput")


_RUNNING: list = []  # this process's pytest sessions (pytester nests them): the innermost is last


def fatal(message: str) -> None:
    """End the session with one clear message (a model that cannot be loaded, a bad device).

    Under pytest-xdist a worker also sets ``session.shouldstop`` to the message and hands it to the
    controller (``workeroutput["t2i_fatal"]``): xdist then stops the run with that reason instead of
    reporting the worker as crashed (an INTERNALERROR), and the controller ends with the message and
    exit code 4, as a run without xdist does.
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
