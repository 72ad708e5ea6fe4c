"""The repository's dependency lock: ``requirements.lock``, compiled from ``pyproject.toml``.

``pyproject.toml`` keeps ranges for users; the repository's own environments (``make install`` and so
``make gate``, ``make test``, ``.ci/run``, ``make bench``) install exactly the versions pinned here, each
with its sha256 hashes (``pip install --require-hashes``). See docs/lock.md for the why.

Commands (``make lock`` and ``make lock-upgrade`` call them)::

    python tools/lock.py compile [--upgrade]   # re-resolve with uv, keeping today's pins where they still fit
    python tools/lock.py digest                # the digest of pyproject's dependency lists
    python tools/lock.py verify                # the lock's recorded digest is pyproject's (else exit 1)
    python tools/lock.py check-freeze FREEZE   # a `pip freeze --all` output equals the lock (for this Python)

Only the standard library and ``packaging`` are used (the lock reader is ``t2i_fairness.base.lockfile``, read
from the checkout), so ``tests/test_lock.py`` runs offline and fast.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "plugin"))  # the lock reader lives in the package (the run's header uses it too)
from t2i_fairness.base.lockfile import applicable, parse_lock as _parse_lock  # noqa: E402  (stdlib + packaging only)
PYPROJECT = REPO / "pyproject.toml"
LOCK = REPO / "requirements.lock"
# The oldest Python the lock resolves for; `--universal` forks the resolution where a newer Python
# needs other versions, so one file serves every supported Python and platform (markers say which line).
LOCK_PYTHON = "3.10"
# The extras the repository's own environments install (all of them).
EXTRAS = ("dev", "ray", "mlflow")
DIGEST_LINE = "# pyproject-digest: "
# Packages pip itself treats specially; locked (with hashes) so the build of the editable install is pinned too.
BUILD_TOOLS = ("pip",)


def _toml(path: Path = PYPROJECT) -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    return tomllib.loads(path.read_text())


def dependency_lists(path: Path = PYPROJECT) -> dict:
    """What the lock is compiled from: build requirements, dependencies, the extras, requires-python."""
    data = _toml(path)
    project = data["project"]
    return {
        "build-system.requires": sorted(data["build-system"]["requires"]),
        "requires-python": project.get("requires-python", ""),
        "dependencies": sorted(project.get("dependencies", [])),
        "optional-dependencies": {k: sorted(v) for k, v in sorted(project.get("optional-dependencies", {}).items())},
        "lock-python": LOCK_PYTHON,
        "build-tools": list(BUILD_TOOLS),
    }


def digest(path: Path = PYPROJECT) -> str:
    """sha256 (first 16 hex digits) of :func:`dependency_lists` as canonical JSON."""
    text = json.dumps(dependency_lists(path), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def recorded_digest(lock: Path = LOCK) -> str | None:
    for line in lock.read_text().splitlines():
        if line.startswith(DIGEST_LINE):
            return line[len(DIGEST_LINE):].strip()
    return None


def parse_lock(lock: Path = LOCK) -> list[dict]:
    """Each pinned requirement: name (canonical), version, marker (or None), hashes (:mod:`t2i_fairness.base.lockfile`)."""
    return _parse_lock(lock)


def _uv() -> str:
    uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    if not Path(uv).exists():
        sys.exit("tools/lock.py: uv not found (make lock installs it into .venv-lock)")
    return uv


def compile_lock(upgrade: bool = False) -> None:
    """Re-resolve ``requirements.lock`` from pyproject.toml with ``uv pip compile --universal``.

    Today's pins are uv's preferences (the lock's body is copied to the output first), so a change to
    pyproject moves only what it must; ``upgrade`` takes the newest releases inside the ranges.
    """
    lists = dependency_lists()
    build = REPO / "build"
    build.mkdir(exist_ok=True)
    src, body = build / "lock-inputs.in", build / "lock-body.txt"
    # The project's own requirements plus what builds it (setuptools) and installs it (pip).
    src.write_text("\n".join(lists["build-system.requires"] + list(BUILD_TOOLS)) + "\n")
    body.write_text("" if upgrade or not LOCK.exists() else LOCK.read_text())
    cmd = [_uv(), "pip", "compile", "pyproject.toml", str(src), *[f"--extra={e}" for e in EXTRAS],
           "--universal", f"--python-version={LOCK_PYTHON}", "--generate-hashes", "--no-header",
           "--annotation-style=line", "--index-url=https://pypi.org/simple", "--quiet", "-o", str(body)]
    if upgrade:
        cmd.append("--upgrade")
    subprocess.run(cmd, cwd=REPO, check=True)
    version = subprocess.run([_uv(), "--version"], capture_output=True, text=True, check=True).stdout.split()[1]
    inputs = ", ".join(lists["build-system.requires"] + list(BUILD_TOOLS))
    header = (
        "# The repository's dependency lock. Written by `make lock` (tools/lock.py); do not edit by hand.\n"
        "# pyproject.toml keeps ranges for users; `make install` installs exactly these, hashes checked.\n"
        f"# compiled with uv {version}: uv pip compile pyproject.toml (+ {inputs}) --extra {' --extra '.join(EXTRAS)}"
        f" --universal --python-version {LOCK_PYTHON} --generate-hashes\n"
        f"{DIGEST_LINE}{digest()}\n"
    )
    lines = [line for line in body.read_text().splitlines() if not line.startswith("# ")]
    LOCK.write_text(header + "\n".join(lines).strip("\n") + "\n")


def check_freeze(freeze: Path) -> int:
    """Compare a ``pip freeze --all`` output with the lock's pins for the running Python; 0 when equal."""
    from packaging.markers import default_environment
    from packaging.utils import canonicalize_name

    want = applicable(parse_lock(), default_environment())
    have: dict[str, str] = {}
    for line in freeze.read_text().splitlines():
        line = line.strip()
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==", 1)
            have[canonicalize_name(name)] = version
    have.pop("t2i-fairness", None)  # the project itself, installed editable from the checkout
    missing = {k: v for k, v in want.items() if have.get(k) != v}
    extra = {k: v for k, v in have.items() if k not in want}
    for k, v in sorted(missing.items()):
        print(f"lock pins {k}=={v}, installed: {have.get(k, 'nothing')}")
    for k, v in sorted(extra.items()):
        print(f"installed {k}=={v}, not in the lock")
    print(f"{len(want)} locked for this Python, {len(have)} installed: "
          + ("equal" if not missing and not extra else "DIFFERENT"))
    return 1 if missing or extra else 0


def verify(lock: Path = LOCK) -> int:
    """0 when the lock was compiled from pyproject's dependency lists as they are now."""
    have, want = recorded_digest(lock), digest()
    if have == want:
        return 0
    print(f"{lock.name} was compiled from other dependency lists than pyproject.toml's (digest {have}, "
          f"pyproject now {want}): run `make lock` and commit requirements.lock", file=sys.stderr)
    return 1


def main(argv: list[str]) -> int:
    if argv[:1] == ["compile"]:
        compile_lock(upgrade="--upgrade" in argv)
        return 0
    if argv[:1] == ["verify"]:
        return verify()
    if argv[:1] == ["digest"]:
        print(digest())
        return 0
    if argv[:1] == ["check-freeze"] and len(argv) == 2:
        return check_freeze(Path(argv[1]))
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
