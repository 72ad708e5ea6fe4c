"""The run history in the HTML report: a small trend per gate, and what changed since the last run.

Reads the run's :class:`~t2i_fairness.history.view.HistoryView` (``session.history``); a run without a
history (``--t2i-no-history``, a store that could not be written) shows neither.
"""

from __future__ import annotations

import html
import math
from typing import Any, Sequence

__all__ = ["since_section", "trend_cell"]


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def trend_svg(points: Sequence[tuple[str, float | None, float | None, float | None]], width: int = 120,
              height: int = 28) -> str:
    """An inline SVG of ``(label, value, low, high)`` points, oldest first, the last one this run's: each value a dot,
    its interval a vertical bar; the scale is the points' own range.

    Example:
        >>> svg = trend_svg([("run 1", 0.5, 0.4, 0.6), ("run 2", 0.7, 0.6, 0.8)])
        >>> svg.count("<circle"), svg.count('class="iv"')
        (2, 2)
    """
    ys = [y for _, v, lo, hi in points for y in (v, lo, hi) if _finite(y)]
    if not ys:
        return ""
    lo_all, hi_all = min(ys), max(ys)
    span = (hi_all - lo_all) or (abs(hi_all) * 0.1 or 1.0)
    pad = 3
    step = (width - 2 * pad) / max(1, len(points) - 1)

    def y(v: float) -> float:
        return round(height - pad - (v - lo_all) / span * (height - 2 * pad), 1)

    parts, line = [], []
    for i, (label, v, lo, hi) in enumerate(points):
        x = round(pad + i * step if len(points) > 1 else width / 2, 1)
        last = i == len(points) - 1
        if _finite(lo) and _finite(hi):
            parts.append(f'<line class="iv" x1="{x}" y1="{y(lo)}" x2="{x}" y2="{y(hi)}" stroke="#aaa" stroke-width="2"/>')
        if _finite(v):
            line.append(f"{x},{y(v)}")
            text = f"{label}: {v:.4f}" + (f" [{lo:.4f}, {hi:.4f}]" if _finite(lo) and _finite(hi) else "")
            parts.append(f'<circle cx="{x}" cy="{y(v)}" r="{3 if last else 2}" fill="{"#05a" if last else "#555"}">'
                         f"<title>{_e(text)}</title></circle>")
    path = f'<polyline points="{" ".join(line)}" fill="none" stroke="#ccc"/>' if len(line) > 1 else ""
    label = f"{len(points)} runs, from {lo_all:.3g} to {hi_all:.3g}"
    return (f'<svg class="trend" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
            f'aria-label="{_e(label)}"><title>{_e(label)}</title>{path}{"".join(parts)}</svg>')


def trend_cell(history, record) -> str:
    """The gate table's ``trend`` cell: the gate's earlier runs and this one."""
    if history is None:
        return ""
    rows = history.trends.get(record.gate, [])
    points = [(f"run #{r.run_id}", r.value, r.low, r.high) for r in rows]
    iv = record.interval or (None, None)
    points.append((f"this run #{history.run_id}", record.value, iv[0], iv[1]))
    hint = "" if rows else '<span class="hint">first run</span>'
    return f'<td class="plot trend-cell">{trend_svg(points) if rows else ""}{hint}</td>'


def _since_row(c) -> str:
    if c.p_value is None:  # a value lost (undefined now)
        cells = (f'<td class="num">{c.a.value:.4f}</td><td class="num">undefined</td><td>-</td><td>-</td><td>-</td>'
                 f"<td>-</td><td>{_e(c.note)}</td>")
    else:
        cells = (f'<td class="num">{c.a.value:.4f}</td><td class="num">{c.b.value:.4f}</td>'
                 f'<td class="num">{c.delta:+.4f}</td><td class="num">[{c.interval[0]:+.4f}, {c.interval[1]:+.4f}]</td>'
                 f'<td>{_e(c.pairing)}</td><td class="num">{c.p_adjusted:.3g}</td>'
                 f'<td>{"regressed" if c.regressed else "improved"}</td>')
    return f'<tr class="{"worse" if c.regressed else "changed"}"><td>{_e(c.gate)}</td>{cells}</tr>'


def since_section(history) -> str:
    """The section "since the last run of this suite": the gates that changed beyond their noise."""
    if history is None:
        return ""
    head = '<section id="since"><h2>Since the last run of this suite</h2>'
    if history.previous is None:
        return head + f"<p>No earlier finished run of these gates in {_e(history.store)}.</p></section>"
    compared = [c for c in history.changes if c.p_value is not None or c.changed]
    changed = history.changed
    rows = "".join(_since_row(c) for c in changed)
    table = ('<table id="since-table"><thead><tr><th>gate</th><th>then</th><th>now</th><th>change</th>'
             f"<th>{1 - history.alpha:.0%} interval</th><th>pairing</th><th>adjusted p</th><th></th></tr></thead>"
             f"<tbody>{rows}</tbody></table>") if changed else ""
    return (head + f'<p class="hint" id="since-summary">Against {_e(history.previous.label)}: {len(changed)} of '
            f"{len(compared)} gate(s) changed beyond noise (two-sided, Holm at {history.alpha:g} across the gates "
            f"compared; t2i-fairness compare {history.previous.id} {history.run_id} lists every gate).</p>"
            + table + "</section>")
