"""Reading a pip-compile ``requirements.lock`` and comparing it with what is installed.

``tools/lock.py`` and the run's header share this reader: the header names every locked package
installed at another version, because a library's version can change a model's random
initialisation and so every image key. Standard library and ``packaging`` only.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["applicable", "installed_versions", "lock_drift", "parse_lock"]


def parse_lock(lock: Path) -> list[dict]:
    """Each pinned requirement: name (canonical), version, marker (or None), extras, hashes.

    Raises:
        OSError: the file cannot be read.
        ValueError: a requirement is not pinned with ``==`` (the message names the file and the line).

    Example:
        >>> import tempfile
        >>> p = Path(tempfile.mkdtemp()) / "requirements.lock"
        >>> _ = p.write_text("# header\\nTorch==2.1 \\\\\\n    --hash=sha256:ab\\nfoo==1.0 ; python_version < '3'\\n")
        >>> [(e["name"], e["version"], str(e["marker"]) if e["marker"] else None) for e in parse_lock(p)]
        [('torch', '2.1', None), ('foo', '1.0', 'python_version < "3"')]
    """
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    entries, text = [], Path(lock).read_text()
    logical = re.sub(r"\\\n\s*", " ", text)  # join continuation lines
    for raw in logical.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#") or line.startswith("-"):
            continue
        parts = line.split(" --hash=")
        req = Requirement(parts[0].strip())
        specs = list(req.specifier)
        if len(specs) != 1 or specs[0].operator != "==":
            raise ValueError(f"{Path(lock).name}: {parts[0]!r} is not pinned with ==")
        entries.append({"name": canonicalize_name(req.name), "version": specs[0].version, "marker": req.marker,
                        "extras": set(req.extras), "hashes": [h.strip() for h in parts[1:]]})
    return entries


def applicable(entries: list[dict], env: dict) -> dict[str, str]:
    """name -> version of the entries whose marker holds in ``env``; a ValueError when two different
    pins of one package apply.
    """
    chosen: dict[str, str] = {}
    for e in entries:
        if e["marker"] is None or e["marker"].evaluate(env):
            if e["name"] in chosen and chosen[e["name"]] != e["version"]:
                raise ValueError(f"{e['name']}: two pins ({chosen[e['name']]}, {e['version']}) apply to one environment")
            chosen[e["name"]] = e["version"]
    return chosen


def installed_versions() -> dict[str, str]:
    """Canonical distribution name -> installed version, for every installed distribution (metadata only)."""
    from importlib.metadata import distributions

    from packaging.utils import canonicalize_name

    out: dict[str, str] = {}
    for dist in distributions():
        name = dist.metadata["Name"] if dist.metadata is not None else None
        if name:
            out.setdefault(canonicalize_name(name), dist.version)
    return out


def lock_drift(lock: Path, installed: dict[str, str] | None = None, env: dict | None = None) -> list[tuple[str, str, str]]:
    """``(package, installed, locked)`` for every package the lock pins for this Python that is installed
    at another version (packages not installed are not listed).

    Example:
        >>> import tempfile
        >>> p = Path(tempfile.mkdtemp()) / "requirements.lock"
        >>> _ = p.write_text("transformers==5.23.0 \\\\\\n    --hash=sha256:ab\\ntorch==2.1\\nray==2.0\\n")
        >>> lock_drift(p, {"transformers": "5.24.0", "torch": "2.1"})
        [('transformers', '5.24.0', '5.23.0')]
    """
    from packaging.markers import default_environment

    pins = applicable(parse_lock(lock), env or default_environment())
    have = installed_versions() if installed is None else installed
    return sorted((name, have[name], version) for name, version in pins.items() if name in have and have[name] != version)
