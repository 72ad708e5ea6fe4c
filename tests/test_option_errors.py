"""Bad option values end the run with one message naming the option (issue #17, item 7)."""

from __future__ import annotations

import pytest

from t2i_fairness.errors import OptionError
from t2i_fairness.base import devices as devices_module


def resolve_device(device: str) -> str:
    """The device a run decides for ``device`` (its context's, :meth:`RunContext.decide`)."""
    return devices_module.RunContext.decide(device).device


@pytest.mark.parametrize("count, device, says", [
    (0, "cuda:7", "'cuda:7': this machine has no CUDA device; use cpu or auto"),
    (0, "cuda", "'cuda': this machine has no CUDA device; use cpu or auto"),
    (2, "cuda:7", "'cuda:7': this machine has 2 CUDA device(s) (cuda:0..cuda:1); use cpu or auto"),
])
def test_a_cuda_device_the_machine_lacks_is_an_error_naming_the_option(monkeypatch, count, device, says):
    monkeypatch.setattr(devices_module, "cuda_count", lambda: count)
    with pytest.raises(OptionError) as info:
        resolve_device(device)
    assert str(info.value).startswith("--t2i-device") and says in str(info.value)


def test_devices_the_machine_has_are_kept_and_auto_picks_cuda_when_there_is_one(monkeypatch):
    monkeypatch.setattr(devices_module, "cuda_count", lambda: 2)
    assert (resolve_device("cuda:1"), resolve_device("cpu"), resolve_device("auto")) == ("cuda:1", "cpu", "cuda")
    monkeypatch.setattr(devices_module, "cuda_count", lambda: 0)
    assert resolve_device("auto") == "cpu"


@pytest.mark.parametrize("args, says", [
    (["--t2i-guidance", "nan"], "--t2i-guidance: must be a finite number >= 0, got nan"),
    (["--t2i-objects", "bag,bag"], "--t2i-objects: 'bag' is given twice"),
    (["--t2i-reference", "a=/tmp", "--t2i-reference", "a=/tmp"], "--t2i-reference: the name 'a' is given twice"),
    # issue #30: seeds numpy would refuse mid-run (negative), or larger than any seed the run makes
    (["--t2i-seed", "-1"], "--t2i-seed: must be an integer in 0..4294967295 (an unsigned 32-bit seed), got -1"),
    (["--t2i-seed", "99999999999999999999"],
     "--t2i-seed: must be an integer in 0..4294967295 (an unsigned 32-bit seed), got 99999999999999999999"),
    (["--t2i-baseline-model", "tiny", "--t2i-baseline-seed", "4294967296"],
     "--t2i-baseline-seed: must be an integer in 0..4294967295 (an unsigned 32-bit seed), got 4294967296"),
    # the built-in synthetic reference set's size: only without --t2i-reference, of known regions
    (["--t2i-synthetic-per-group", "0"], "--t2i-synthetic-per-group: must be >= 1, got 0"),
    (["--t2i-synthetic-regions", "atlantis"], "--t2i-synthetic-regions: unknown region(s) ['atlantis']"),
    (["--t2i-reference", "r=synthetic", "--t2i-synthetic-per-group", "5"],
     "--t2i-synthetic-per-group: sizes the built-in synthetic reference set, which a run with --t2i-reference "
     "does not use"),
])
def test_silent_option_values_are_usage_errors(pytester, args, says):
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert says in result.stderr.str()


def test_the_device_is_decided_once_and_both_workbenches_get_it(pytester, monkeypatch):
    """``--t2i-device`` and ``--t2i-precision`` are decided once per session into one frozen run context:
    the baseline's and the candidate's workbenches both receive that context (neither decides again)."""
    from demo_gates import DemoProject

    from t2i_fairness.base import devices

    calls, benches = [], []
    real = devices.decide_device
    monkeypatch.setattr(devices, "decide_device", lambda requested="auto", **kw: calls.append(requested) or real(requested, **kw))
    from t2i_fairness.spine import workbench

    init = workbench.Workbench.__init__

    def spy(self, *args, **kwargs):
        assert kwargs.get("run") is not None, "a workbench was built without the session's run context"
        init(self, *args, **kwargs)
        benches.append(self.run)

    monkeypatch.setattr(workbench.Workbench, "__init__", spy)
    project = DemoProject(pytester, "--t2i-model", "python:fakegen:make", "--t2i-objects", "bag",
                          "--t2i-images-per-prompt", "2", "--t2i-device", "cpu", "-k", "africa or europe")
    project.run("--t2i-baseline-model", "python:fakegen:make", "--t2i-update-thresholds",
                "--t2i-precision", "bfloat16").assert_outcomes(passed=4)
    assert calls == ["cpu"], calls
    assert benches == [devices.RunContext("cpu", "bfloat16")] * 2 and benches[0] is benches[1], benches


def test_decide_device_has_one_caller_in_the_code():
    """One place turns ``--t2i-device`` into a device: :meth:`RunContext.decide` (everything else is handed
    the context it made)."""
    import re
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    callers = [f"{p.relative_to(repo)}:{n}" for p in [*(repo / "plugin").rglob("*.py"), *(repo / "fixtures").glob("*.py")]
               for n, line in enumerate(p.read_text().splitlines(), 1)
               if re.search(r"\bdecide_device\(", line) and not line.lstrip().startswith(("def ", ">>>", "#"))]
    assert callers == ["plugin/t2i_fairness/base/devices.py:" + str(_line_of_the_call(repo))], callers


def _line_of_the_call(repo) -> int:
    lines = (repo / "plugin" / "t2i_fairness" / "base" / "devices.py").read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if "return cls(decide_device(" in line)
