"""What changed, said once at the top of the terminal summary and of the HTML report.

Settings since the bounds were set (model, library versions, device, sample sizes: usually every
gate at once) and identities since the last run with this cache (new weights, a scorer's new
fingerprint, unversioned ``python:`` fingerprints), plus the time spent on weights digests and the
run header's library version lines (:func:`version_lines`). docs/outputs.md shows them.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from t2i_fairness.gating.session import GateSession

__all__ = ["ProvenanceSummary", "change_lines", "changes_html", "digest_line", "provenance_changes", "provenance_summary",
           "version_lines"]


def provenance_changes(session: GateSession) -> tuple[int, list[tuple[str, str, str, int]]]:
    """(gates with a change, [(field, old, new, gates with that change)]) over the run's gates."""
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


# What a changed setting means for the bounds (the fields of ``Workbench.provenance`` and the families'):
IDENTITY_FIELDS = ("model", "scorers")  # another model or scorer: the bounds describe something else
ENVIRONMENT_FIELDS = ("t2i_fairness", "torch", "torchvision", "diffusers", "transformers", "open_clip", "timm",
                      "device", "gpu", "precision")  # same model and sample, other numerics


@dataclass
class ProvenanceSummary:
    """What differs between this run's settings and those its bounds were written under, once per run.

    Attributes:
        changes: ``[(field, old, new, gates with that change)]``.
        groups: provenance id in the thresholds file -> gates of this run in that group with a change.
        kind: ``identity`` (another model or scorer: bounds not comparable), ``environment``
            (libraries, device: comparable, values may have moved) or ``sample`` (other sizes or seed).
        meaning: the plain sentence a reader acts on.
    """

    gates: int
    total: int
    changes: list[tuple[str, str, str, int]]
    groups: dict[str, int]
    kind: str
    meaning: str

    def to_dict(self) -> dict:
        return {"gates": self.gates, "total": self.total, "kind": self.kind, "meaning": self.meaning,
                "changes": [{"field": f, "old": a, "new": b, "gates": n} for f, a, b, n in self.changes],
                "groups": dict(self.groups)}

    def lines(self, thresholds: str = "") -> list[str]:
        """The terminal block: header, one line per changed field, the bound groups, what it means."""
        where = f" in {thresholds}" if thresholds else ""
        out = [f"WARNING: {self.gates} gate(s) were set under other settings:"]
        for field, old, new, n in self.changes:
            out.append(f"  {field}: {old} -> {new}" + ("" if n == self.gates else f" ({n} gates)"))
        if self.groups:
            out.append(f"  bounds: {self.gates} of {self.total} gates, {_groups_text(self.groups)}{where}")
        out.append(f"  meaning: {self.meaning}")
        return out


def _groups_text(groups: dict[str, int], limit: int = 8) -> str:
    items = sorted(groups.items(), key=lambda kv: (-kv[1], kv[0]))
    text = ", ".join(f"{pid} ({n})" for pid, n in items[:limit])
    more = f", ... and {len(items) - limit} more" if len(items) > limit else ""
    return f"{len(items)} provenance group{'s' if len(items) != 1 else ''}: {text}{more}"


def provenance_summary(session: GateSession) -> ProvenanceSummary | None:
    """The run's provenance block, or ``None`` when every bound was written under this run's settings.

    Example:
        >>> from pathlib import Path
        >>> s = GateSession(Path("t.yaml"))
        >>> s.add(dict(gate="g", nodeid="g", value=1.0, n=1, direction="min", status="pass", bound=0.5, write=None,
        ...            message="", provenance={}, provenance_changes={"torch": ["2.1", "2.2"]}, bound_provenance="ab12cd34"))
        >>> p = provenance_summary(s)
        >>> p.kind, p.groups, p.meaning.split(":")[0]
        ('environment', {'ab12cd34': 1}, 'the same model and sample in another environment (torch)')
    """
    gates, changes = provenance_changes(session)
    if not changes:
        return None
    judged = [r for r in session.records if r.status != "baseline" and r.bound is not None]
    groups: dict[str, int] = {}
    for r in session.records:
        if r.status != "baseline" and r.provenance_changes and r.bound_provenance:
            groups[r.bound_provenance] = groups.get(r.bound_provenance, 0) + 1
    fields = sorted({f for f, _, _, _ in changes})
    identity = [f for f in fields if f in IDENTITY_FIELDS]
    environment = [f for f in fields if f in ENVIRONMENT_FIELDS]
    sample = [f for f in fields if f not in IDENTITY_FIELDS and f not in ENVIRONMENT_FIELDS]
    if identity:
        kind = "identity"
        meaning = (f"another model or scorer ({', '.join(identity)}): its images and scores were made anew and the "
                   "bounds describe the other one, so they are NOT comparable; review the new values and re-write "
                   "the bounds (--t2i-update-thresholds), or run under the settings they were written under")
        seeded = [(a, b) for f, a, b, _ in changes if f == "model" and "@init-" in a and "@init-" in b]
        if seeded and environment:
            meaning += (f". The model has random weights, and its identity includes the libraries that initialise "
                        f"them, so the change of {', '.join(environment)} made it another model")
    elif environment:
        kind = "environment"
        meaning = (f"the same model and sample in another environment ({', '.join(environment)}): the bounds "
                   "are comparable, but the values may have moved with the numerics (images are made anew where "
                   "the device is in their key); a gate that fails now may reflect the environment, not the model")
    else:
        kind = "sample"
        meaning = (f"the same model measured on another sample ({', '.join(sample)}): the bounds are comparable, "
                   "with other sampling noise (images for new prompts or seeds were generated)")
    if kind == "environment" and sample:
        meaning += f"; and measured on another sample ({', '.join(sample)}), with other sampling noise"
    return ProvenanceSummary(gates, len(judged), changes, groups, kind, meaning)


def change_lines(session: GateSession) -> list[str]:
    """The top of the terminal summary: settings changed since the bounds were set, identities since
    the last run; empty when nothing changed.
    """
    out: list[str] = []
    summary = provenance_summary(session)
    if summary is not None:
        out += summary.lines(str(session.thresholds_path))
    out += session.cache.identity
    return out


def digest_line(session: GateSession) -> str | None:
    """``weights digests: 0.013 s, 31 files (2 read, 1.2 MB; ...)``, or ``None`` when none was computed."""
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
    """The same as :func:`change_lines`, as a section for the top of the HTML report ("" when nothing changed)."""
    summary = provenance_summary(session)
    items = []
    if summary is not None:
        rows = "".join(
            f"<li><code>{html.escape(f)}</code>: {html.escape(a)} &rarr; {html.escape(b)}"
            + ("" if n == summary.gates else f" ({n} gates)") + "</li>" for f, a, b, n in summary.changes)
        groups = (f"<p>Bounds: {summary.gates} of {summary.total} gates, {html.escape(_groups_text(summary.groups))} "
                  f"in <code>{html.escape(str(session.thresholds_path))}</code>.</p>") if summary.groups else ""
        items.append(f'<div id="provenance" data-kind="{summary.kind}" data-gates="{summary.gates}">'
                     f"<p><strong>{summary.gates} gate(s) were set under other settings</strong>:</p><ul>{rows}</ul>"
                     f"{groups}<p><strong>What it means:</strong> {html.escape(summary.meaning)}.</p></div>")
    if session.cache.identity:
        rows = "".join(f"<li>{html.escape(n)}</li>" for n in session.cache.identity)
        items.append(f"<p><strong>Model identity</strong> (weights changed since the last run with this cache, fingerprints to check):</p><ul>{rows}</ul>")
    check = session.scorer_check
    if check is not None:  # the scorers against their golden record: one line, or each scorer that moved
        items.append(f'<div id="scorer-check" data-ok="{str(check.ok).lower()}">'
                     + "".join(f"<p>{html.escape(line.removeprefix('t2i-fairness: '))}</p>" for line in check.lines())
                     + "</div>")
    if not items:
        return ""
    return f'<section id="changes" class="banner" role="note"><h2>What changed</h2>{"".join(items)}</section>'


def _public(version) -> str:
    """A version without its local part (``2.14.1+cu130`` -> ``2.14.1``): the provenance records torch's
    ``__version__``, the installed metadata may lack the local part."""
    text = str(version)
    try:
        from packaging.version import Version

        return Version(text).public
    except Exception:  # noqa: BLE001 - not a PEP 440 version: compared as written
        return text


def version_lines(lock, thresholds, installed: dict[str, str] | None = None, limit: int = 8) -> list[str]:
    """The run header's lines naming libraries installed at other versions than ``lock`` pins or than
    the bounds of ``thresholds`` were measured under, said before anything is generated.

    Args:
        lock: the lock file (skipped when missing or unreadable).
        installed: canonical name -> version (default: what is installed).
        limit: packages named per line (the rest counted).

    Example:
        >>> from types import SimpleNamespace as NS
        >>> t = NS(path="t.yaml", gates={"g": NS(provenance="p"), "h": NS(provenance="p")},
        ...        provenances={"p": {"transformers": "5.23.0", "torch": "2.14.1+cu130", "seed": 0}})
        >>> version_lines("/no/such.lock", t, {"transformers": "5.24.0", "torch": "2.14.1"})
        ['t2i-fairness: the bounds in t.yaml were measured under other library versions: transformers 5.23.0 (2 gates; installed 5.24.0); the values they were set from may have moved (the summary lists what changed)']
    """
    from pathlib import Path

    from t2i_fairness.base.identity import LIBRARIES
    from t2i_fairness.base.lockfile import installed_versions, lock_drift

    from packaging.utils import canonicalize_name

    have = installed_versions() if installed is None else installed
    out = []
    try:
        drift = lock_drift(Path(lock), have) if Path(lock).is_file() else []
    except (OSError, ValueError) as exc:
        drift, out = [], [f"t2i-fairness: {lock}: cannot compare the installed versions with it ({exc})"]
    if drift:
        named = ", ".join(f"{name} {now} (locked {pinned})" for name, now, pinned in drift[:limit])
        more = f", and {len(drift) - limit} more" if len(drift) > limit else ""
        out.append(f"t2i-fairness: installed versions differ from {lock}: {named}{more}; a library's version can change "
                   "a model's random weights and so every image key (images made anew) or move the numbers "
                   "(`make install` installs the lock)")
    names = {("open_clip" if d == "open_clip_torch" else d): canonicalize_name(d) for d in LIBRARIES}
    used: dict[tuple[str, str, str], int] = {}
    for bound in thresholds.gates.values():
        settings = thresholds.provenances.get(bound.provenance) if bound.provenance else None
        for key, dist in names.items():
            stored = (settings or {}).get(key)
            now = have.get(dist)
            if stored is not None and now is not None and _public(stored) != _public(now):
                used[(key, str(stored), now)] = used.get((key, str(stored), now), 0) + 1
    if used:
        named = ", ".join(f"{key} {stored} ({n} gate{'s' if n != 1 else ''}; installed {now})"
                          for (key, stored, now), n in sorted(used.items())[:limit])
        more = f", and {len(used) - limit} more" if len(used) > limit else ""
        out.append(f"t2i-fairness: the bounds in {thresholds.path} were measured under other library versions: "
                   f"{named}{more}; the values they were set from may have moved (the summary lists what changed)")
    return out
