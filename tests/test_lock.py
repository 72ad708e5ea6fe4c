"""requirements.lock agrees with pyproject.toml (offline, reads files only; docs/lock.md).

The repository's own environments install the lock (``make install``: ``pip install --require-hashes``);
users install pyproject's ranges. These tests fail when the two drift apart: a dependency added, removed
or re-ranged in pyproject.toml without ``make lock``, a pin outside its range, torch and torchvision
from two releases, or a lock that no longer reproduces the environment thresholds/tiny.yaml was written in.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
import lock  # noqa: E402

ENTRIES = lock.parse_lock()

# The environments the lock is said to cover (docs/lock.md): CPython 3.10-3.12 on Linux x86_64, where the
# gate and CI run (the GPU machine runs 3.12); resolved for macOS, Windows and aarch64 too.
PYTHONS = ("3.10", "3.11", "3.12")
PLATFORMS = {
    "linux-x86_64": {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
                     "os_name": "posix"},
    "linux-aarch64": {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "aarch64",
                      "os_name": "posix"},
    "macos-arm64": {"sys_platform": "darwin", "platform_system": "Darwin", "platform_machine": "arm64",
                    "os_name": "posix"},
    "windows-amd64": {"sys_platform": "win32", "platform_system": "Windows", "platform_machine": "AMD64",
                      "os_name": "nt"},
}


def marker_env(python: str, platform: str) -> dict:
    return {"implementation_name": "cpython", "platform_python_implementation": "CPython",
            "python_version": python, "python_full_version": python + ".0", "platform_release": "",
            "platform_version": "", "implementation_version": python + ".0", "extra": "",
            **PLATFORMS[platform]}


def pyproject_requirements() -> list[tuple[str, Requirement]]:
    lists = lock.dependency_lists()
    found = [("dependencies", Requirement(r)) for r in lists["dependencies"]]
    found += [(f"[{extra}]", Requirement(r)) for extra, reqs in lists["optional-dependencies"].items() for r in reqs]
    found += [("build-system.requires", Requirement(r)) for r in lists["build-system.requires"]]
    return found


def test_the_lock_records_the_digest_of_pyprojects_dependency_lists(tmp_path):
    assert lock.recorded_digest() == lock.digest(), "pyproject.toml's dependencies changed: run `make lock`"
    # the digest sees a change of any list (so a stale lock cannot pass)
    text = lock.PYPROJECT.read_text()
    for old, new in (('"scipy>=1.10"', '"scipy>=1.11"'), ('"ray[data]>=2.9"', '"ray[data]>=2.10"'),
                     ('requires = ["setuptools>=77"]', 'requires = ["setuptools>=78"]')):
        assert old in text, old
        changed = tmp_path / f"pyproject-{len(old)}.toml"
        changed.write_text(text.replace(old, new))
        assert lock.digest(changed) != lock.digest(), (old, new)
    assert lock.verify() == 0


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
@pytest.mark.parametrize("python", PYTHONS)
def test_every_dependency_of_pyproject_is_pinned_inside_its_range(python, platform):
    env = marker_env(python, platform)
    pins = lock.applicable(ENTRIES, env)  # raises when two pins of one package apply
    wrong = []
    for where, req in pyproject_requirements():
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        name = canonicalize_name(req.name)
        if name not in pins:
            wrong.append(f"{where} {req}: not in requirements.lock")
        elif not req.specifier.contains(pins[name], prereleases=True):
            wrong.append(f"{where} {req}: locked at {pins[name]}, outside the range")
    for tool in lock.BUILD_TOOLS:
        if canonicalize_name(tool) not in pins:
            wrong.append(f"{tool}: not in requirements.lock")
    assert not wrong, "\n".join(wrong) + "\n(run `make lock`)"


def test_every_pin_is_exact_and_hashed():
    assert len(ENTRIES) > 100
    for e in ENTRIES:
        assert e["hashes"] and all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for h in e["hashes"]), e["name"]
    # the lock's packages are the ones the resolution needs: none is listed twice under one environment
    names = [e["name"] for e in ENTRIES if e["marker"] is None]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("python", PYTHONS)
def test_torch_and_torchvision_are_pinned_as_a_pair(python):
    pins = lock.applicable(ENTRIES, marker_env(python, "linux-x86_64"))
    torch, vision = Version(pins["torch"]), Version(pins["torchvision"])
    # torchvision 0.(N+15).P is built against torch 2.N.P (the pair's own release table)
    assert (torch.major, torch.minor + 15, torch.micro) == (vision.major + 2, vision.minor, vision.micro), (torch, vision)
    # pyproject names the pair the lock holds (its comment is what a reader of the ranges sees)
    said = re.search(r"torch ([0-9.]+) with torchvision ([0-9]+(?:\.[0-9]+)*)", lock.PYPROJECT.read_text())
    assert said and (said[1], said[2]) == (pins["torch"], pins["torchvision"]), said


@pytest.mark.parametrize("python", ["3.11", "3.12"])
def test_the_lock_reproduces_the_libraries_the_tiny_bounds_were_written_under(python):
    """thresholds/tiny.yaml's provenance names the libraries that made the tiny model's weights and scored
    its images; a lock that moves one makes another tiny model (its init- identity) and another gate."""
    pins = lock.applicable(ENTRIES, marker_env(python, "linux-x86_64"))
    provenance = yaml.safe_load((REPO / "thresholds" / "tiny.yaml").read_text())["provenance"]
    dists = {"torch": "torch", "torchvision": "torchvision", "diffusers": "diffusers", "transformers": "transformers",
             "open_clip": "open-clip-torch", "timm": "timm"}
    assert provenance
    for key, settings in provenance.items():
        for field, dist in dists.items():
            written = Version(str(settings[field])).public.split("+")[0]  # 2.14.1+cu130: the build tag aside
            assert pins[dist] == written, f"tiny.yaml provenance {key} {field}: {written}, lock: {pins[dist]}"


def test_check_freeze_tells_an_installed_environment_from_the_lock(tmp_path, capsys):
    from packaging.markers import default_environment

    pins = lock.applicable(ENTRIES, default_environment())
    freeze = tmp_path / "freeze.txt"
    lines = [f"{name}=={version}" for name, version in sorted(pins.items())] + ["-e /somewhere/t2i-fairness"]
    freeze.write_text("\n".join(lines) + "\n")
    assert lock.check_freeze(freeze) == 0
    freeze.write_text("\n".join(lines).replace(f"transformers=={pins['transformers']}", "transformers==0.0.1")
                      + "\nextra-pkg==1.0\n")
    assert lock.check_freeze(freeze) == 1
    out = capsys.readouterr().out
    assert f"lock pins transformers=={pins['transformers']}, installed: 0.0.1" in out
    assert "installed extra-pkg==1.0, not in the lock" in out


def test_the_run_header_names_libraries_that_differ_from_the_lock_and_from_the_bounds(pytester):
    """Issue #30: transformers 5.24.0 against the lock's 5.23.0 made the tiny model's weights new and every image
    was made again, unsaid. The header names the package, what is installed and what the lock (or the bounds'
    provenance) says, before anything is generated."""
    from importlib.metadata import version

    transformers, torch = version("transformers"), version("torch")
    (pytester.path / "requirements.lock").write_text(
        f"# a lock\ntransformers==0.0.1 \\\n    --hash=sha256:00\ntorch=={torch} \\\n    --hash=sha256:11\nno-such-dist-t2i==1.0\n")
    thresholds = pytester.path / "t.yaml"
    thresholds.write_text("gates:\n  test_cis[k1]:\n    min: 0.1\n    provenance: p1\n  test_cis[k2]:\n    min: 0.1\n"
                          f"    provenance: p1\nprovenance:\n  p1: {{transformers: 0.0.2, torch: {torch}+cu999, seed: 0}}\n")
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--t2i-thresholds", str(thresholds))
    out = result.stdout.str()
    assert result.ret == 0, out
    assert (f"t2i-fairness: installed versions differ from {pytester.path / 'requirements.lock'}: transformers "
            f"{transformers} (locked 0.0.1); ") in out, out
    assert (f"t2i-fairness: the bounds in {thresholds} were measured under other library versions: transformers 0.0.2 "
            f"(2 gates; installed {transformers}); ") in out, out
    assert "torch" not in out.split("test_x.py")[0].split("installed versions differ")[1]  # same public version
    # the header comes before the tests run
    assert out.index("installed versions differ") < out.index("test_x.py")
