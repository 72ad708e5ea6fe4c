"""Shared fixtures for the project's own tests.

Building the tiny diffusion pipeline costs seconds, so one instance serves the whole session;
everything else uses ``fakegen`` (flat colours from the seed) to stay fast.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import numpy.fft  # noqa: F401
import pytest
import scipy.special  # noqa: F401

# In-process pytester runs drop the modules first imported inside them, and numpy.fft's C extension
# (imported by scipy.special, which the gates' p-values use) cannot be loaded twice in one process:
# load both here, before any in-process run, so no test depends on which test ran first.

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent


@pytest.fixture(scope="session")
def load_bench():
    """``load_bench(name)``: the script ``bench/<name>.py`` as a module (registered under ``name`` while the
    session runs, so its dataclasses and pickles resolve), loaded once."""
    loaded: dict[str, object] = {}

    def load(name: str):
        if name not in loaded:
            spec = importlib.util.spec_from_file_location(name, REPO / "bench" / f"{name}.py")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
            loaded[name] = module
        return loaded[name]

    yield load
    for name in loaded:
        sys.modules.pop(name, None)


@pytest.fixture(scope="session")
def tiny_generator():
    """The built-in tiny StableDiffusionPipeline on CPU, one thread (bytes must not depend on threading)."""
    import torch

    from t2i_fairness.generators.diffusers_pipe import DiffusersGenerator

    torch.set_num_threads(1)
    return DiffusersGenerator.tiny(device="cpu")


@pytest.fixture(scope="session")
def _models_imported():
    """The tiny generator and every tiny scorer built once, so their modules are imported
    in this process before any in-process pytester run.

    An in-process run (``pytester.runpytest``) drops the modules first imported inside it. diffusers and
    transformers resolve classes lazily and cache them on their top-level module, so a model module dropped
    after a run and imported again later makes two ``ModelMixin`` classes: ``save_pretrained`` then writes
    no weights ("self.vae=AutoencoderKL(...) cannot be saved"), and a module that registers torch operators
    fails when imported twice. Imported once here, the runs share them (and do not import them again each).
    """
    from t2i_fairness.base.devices import RunContext
    from t2i_fairness.generators.diffusers_pipe import DiffusersGenerator
    from t2i_fairness.models import registry

    DiffusersGenerator.tiny(device="cpu")  # not the fixture: that one sets torch to one thread for all
    for kind in registry.SCORERS.values():
        kind.build("tiny", RunContext("cpu"))


@pytest.fixture(autouse=True)
def _models_imported_before_in_process_runs(request):
    if "pytester" in request.fixturenames or "in_process" in request.fixturenames:
        # this session's own test modules (``test_cis`` of tests/) leave sys.modules while the test runs: an
        # in-process run of the suite imports its ``test_cis.py`` under the same name ("import file mismatch")
        monkeypatch = request.getfixturevalue("monkeypatch")
        for name, module in list(sys.modules.items()):
            if name.startswith("test_") and "." not in name and Path(getattr(module, "__file__", None) or "/").parent == TESTS:
                monkeypatch.delitem(sys.modules, name)
    if "pytester" in request.fixturenames:
        request.getfixturevalue("_models_imported")
        # pytester's runs (in process and in a child) leave out hypothesis's pytest plugin: its terminal
        # summary imports hypothesis (0.6 s a child run; no run of the suite uses it). pytester clears
        # PYTEST_ADDOPTS when it is made, so this is set after it.
        request.getfixturevalue("pytester")
        request.getfixturevalue("monkeypatch").setenv("PYTEST_ADDOPTS", "-p no:hypothesispytest")


@pytest.fixture
def fake_source():
    """A GeneratorSource around a fresh ``fakegen`` generator (batch size 4)."""
    from fakegen import FakeGenerator

    from t2i_fairness.generators import GenerationSettings, GeneratorSource

    gen = FakeGenerator(batch_size=4)
    return GeneratorSource("python:fakegen:make", gen.fingerprint, GenerationSettings(batch_size=4), lambda: gen, gen)


@pytest.fixture
def in_process(request, monkeypatch):
    """``in_process.cli(args, cwd=...)`` / ``in_process.pytest(args, cwd=...)``: ``t2i-fairness ARGS`` and
    ``pytest ARGS`` run in this process as a child would run them, without a child's 8-10 s of imports
    (``tests/inprocess.py``); a ``subprocess.CompletedProcess``."""
    from inprocess import InProcess

    request.getfixturevalue("_models_imported")
    return InProcess(monkeypatch)


@pytest.fixture
def subprocess_env():
    """Environment for child Pythons: this worktree's package first, offline, one thread."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "plugin"), str(TESTS), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", PYTHONHASHSEED="0")
    return env



def _cuda_reason() -> str | None:
    """Why the GPU lane cannot run here, or None where CUDA is present."""
    try:
        import torch
    except ImportError:
        return "gpu lane: torch is not installed"
    if not torch.cuda.is_available():
        return ("gpu lane: no CUDA device here (torch.cuda.is_available() is False); run `make gpu` on a GPU "
                "machine, see docs/gpu.md")
    return None


def pytest_collection_modifyitems(config, items):
    """Tests marked ``gpu`` are skipped, with the reason, on a machine without CUDA."""
    gpu = [item for item in items if item.get_closest_marker("gpu") is not None]
    reason = _cuda_reason() if gpu else None
    if reason:
        for item in gpu:
            item.add_marker(pytest.mark.skip(reason=reason))
