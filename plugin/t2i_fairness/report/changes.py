"""What changed, said once at the top of the terminal summary and of the HTML report.

Two kinds of change make a run's numbers read differently, and neither belongs on every gate's line:

- **settings since the bounds were set**: the provenance a bound was measured under (model
  fingerprint, library versions, device class, GPU name, sample sizes) differs from this run's.
  The same change usually concerns every gate (a torch upgrade, another GPU), so it is listed once,
  with the number of gates it concerns when that is not all of them;
- **identities since the last run with this cache**: a model's weights (a folder's digest, a hub
  commit) or a scorer's fingerprint changed, so images or features were made anew (or, back to
  weights seen before, read again), and unversioned ``python:`` fingerprints.

It also formats the time spent computing weights digests (:mod:`t2i_fairness.base.identity`).
"""

from __future__ import annotations

import html

from t2i_fairness.gating.session import GateSession

__all__ = ["change_lines", "changes_html", "digest_line", "provenance_changes"]


def provenance_changes(session: GateSession) -> tuple[int, list[tuple[str, str, str, int]]]:
    """(gates with a change, [(field, old, new, gates with that change)]) over the run's gates.

    Example:
        >>> from pathlib import Path
        >>> s = GateSession(Path("t.yaml"))
        >>> for g in ("a", "b"):
        ...     s.add(dict(gate=g, nodeid=g, value=1.0, n=1, direction="min", status="pass", bound=0.5, write=None,
        ...                message="", provenance={}, provenance_changes={"torch": ["2.1", "2.2"]}))
        >>> provenance_changes(s)
        (2, [('torch', '2.1', '2.2', 2)])
    """
    counts: dict[tuple[str, str, str], int] = {}
    gates = 0
    for r in session.records:
        if r.status == "baseline" or not r.provenance_changes:
            continue
        gates += 1
        for field, (old, new) in r.provenance_changes.items():
            key = (field, str(old), str(new))
            counts[key] = counts.get(key, 0) + 1
    return gates, [(f, a, b, n) for (f, a, b), n in sorted(counts.items())]


def change_lines(session: GateSession) -> list[str]:
    """The top of the terminal summary: settings changed since the bounds were set, identities since
    the last run; empty when nothing changed.

    Example:
        >>> from pathlib import Path
        >>> s = GateSession(Path("t.yaml"))
        >>> s.cache.identity.append("model /m: new weights sha256-b (the last run with this cache had sha256-a): ...")
        >>> change_lines(s)[0][:30]
        'model /m: new weights sha256-b'
    """
    out: list[str] = []
    gates, changes = provenance_changes(session)
    if changes:
        out.append(f"WARNING: {gates} gate(s) were set under other settings:")
        for field, old, new, n in changes:
            out.append(f"  {field}: {old} -> {new}" + ("" if n == gates else f" ({n} gates)"))
    out += session.cache.identity
    return out


def digest_line(session: GateSession) -> str | None:
    """``weights digests: 0.013 s, 31 files (2 read, 1.2 MB)``, or ``None`` when none was computed.

    Example:
        >>> from pathlib import Path
        >>> s = GateSession(Path("t.yaml")); s.cache.digests.update(seconds=0.0132, files=31, read=2, bytes=1.2e6)
        >>> digest_line(s)
        'weights digests: 0.013 s, 31 files (2 read, 1.2 MB; the others remembered)'
    """
    d = session.cache.digests
    if not d or not d.get("files"):
        return None
    read = int(d.get("read", 0))
    return (f"weights digests: {d.get('seconds', 0.0):.3f} s, {int(d['files'])} files "
            f"({read} read, {_size(d.get('bytes', 0))}; the others remembered)")


def _size(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"  # pragma: no cover


def changes_html(session: GateSession) -> str:
    """The same as :func:`change_lines`, as a section for the top of the HTML report ("" when nothing changed).

    Example:
        >>> from pathlib import Path
        >>> s = GateSession(Path("t.yaml")); changes_html(s)
        ''
        >>> s.cache.identity.append("scorer clip (paper): new weights x (the last run with this cache had y): ...")
        >>> 'id="changes"' in changes_html(s)
        True
    """
    gates, changes = provenance_changes(session)
    items = []
    if changes:
        rows = "".join(
            f"<li><code>{html.escape(f)}</code>: {html.escape(a)} &rarr; {html.escape(b)}"
            + ("" if n == gates else f" ({n} gates)") + "</li>" for f, a, b, n in changes)
        items.append(f"<p><strong>{gates} gate(s) were set under other settings</strong> (their bounds were "
                     f"measured under these; each still applies):</p><ul>{rows}</ul>")
    if session.cache.identity:
        rows = "".join(f"<li>{html.escape(n)}</li>" for n in session.cache.identity)
        items.append(f"<p><strong>Model identity</strong> (weights changed since the last run with this cache, fingerprints to check):</p><ul>{rows}</ul>")
    if not items:
        return ""
    return f'<section id="changes" class="banner" role="note"><h2>What changed</h2>{"".join(items)}</section>'
