"""The labelling page: one self-contained HTML file (images as data URIs, no network), keys y / n / s, resumable.

A unit drawn for several gates (the same image and question) is asked once; its answer is saved for each of them.

The page keeps its labels in the browser's ``localStorage`` under the sample's id (a reload, or opening the file
again, resumes where it stopped) and offers them as a CSV (a Blob link, ``labels.csv``) in the columns
:func:`t2i_fairness.audit.labels.read_labels` reads. It never shows the scorer's answer: the person labels blind.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import html
import io
import json
from pathlib import Path

from t2i_fairness.audit.sample import Drawn

__all__ = ["PAGE", "SAMPLE", "image_uri", "write_page"]

PAGE, SAMPLE = "audit.html", "audit-sample.csv"
MAX_PNG_BYTES = 150_000  # a larger image is embedded as a JPEG (quality 90): 400 paper-size PNGs would be 150 MB

_STYLE = """body{font-family:system-ui,sans-serif;margin:1.5em;max-width:60em}img{max-width:512px;min-width:256px;
image-rendering:pixelated;border:1px solid #999}#question{font-size:1.4em;margin:.5em 0}.asked{color:#555;
font-size:.9em}.done{color:#070}kbd{border:1px solid #aaa;border-radius:3px;padding:0 .3em}"""

_SCRIPT = r"""
const S = JSON.parse(document.getElementById('sample').textContent);
const KEY = 't2i-audit:' + S.id;
let labels = {};
try { labels = JSON.parse(localStorage.getItem(KEY) || '{}'); } catch (e) { labels = {}; }
let pos = S.items.findIndex(it => !(it.unit in labels));
if (pos < 0) pos = S.items.length;
const $ = id => document.getElementById(id);
function cell(v) { v = String(v); return /[",\n\r]/.test(v) ? '"' + v.replace(/"/g, '""') + '"' : v; }
function csv() {
  const rows = [['seed', 'gate', 'unit', 'question', 'label', 'prompt']];
  for (const it of S.items) if (it.unit in labels) for (const gate of it.gates) rows.push([S.seed, gate, it.unit, it.question, labels[it.unit], it.prompt]);
  return rows.map(r => r.map(cell).join(',')).join('\n') + '\n';
}
function save() {
  localStorage.setItem(KEY, JSON.stringify(labels));
  const link = $('save');
  if (link.dataset.url) URL.revokeObjectURL(link.dataset.url);
  link.dataset.url = URL.createObjectURL(new Blob([csv()], {type: 'text/csv'}));
  link.href = link.dataset.url;
}
function show() {
  const n = Object.keys(labels).length;
  $('progress').textContent = n + ' of ' + S.items.length + ' answered';
  if (pos >= S.items.length) {
    $('item').hidden = true; $('finished').hidden = false; return;
  }
  const it = S.items[pos];
  $('item').hidden = false; $('finished').hidden = true;
  $('image').src = it.image; $('question').textContent = it.question; $('asked').textContent = it.asked;
  $('prompt').textContent = it.prompt; $('position').textContent = (pos + 1) + ' / ' + S.items.length;
  $('current').textContent = it.unit in labels ? 'your answer: ' + labels[it.unit] : '';
}
const ANSWER = {y: 'yes', n: 'no', s: 'skip'};
document.addEventListener('keydown', e => {
  const k = e.key.toLowerCase();
  if (k in ANSWER && pos < S.items.length) { labels[S.items[pos].unit] = ANSWER[k]; save(); pos += 1; show(); }
  else if ((k === 'arrowleft' || k === 'backspace') && pos > 0) { pos -= 1; show(); e.preventDefault(); }
  else if (k === 'arrowright' && pos < S.items.length) { pos += 1; show(); }
});
save(); show();
"""


def image_uri(path: Path | str) -> str:
    """The image file as a ``data:`` URI (a PNG as it is; one over :data:`MAX_PNG_BYTES` as a JPEG)."""
    data = Path(path).read_bytes()
    if len(data) <= MAX_PNG_BYTES:
        return "data:image/png;base64," + base64.b64encode(data).decode("ascii")
    from PIL import Image

    out = io.BytesIO()
    with Image.open(io.BytesIO(data)) as im:
        im.convert("RGB").save(out, "JPEG", quality=90)
    return "data:image/jpeg;base64," + base64.b64encode(out.getvalue()).decode("ascii")


def write_page(drawn: list[Drawn], seed: int, out: Path | str, *, title: str = "") -> tuple[Path, Path]:
    """Write the labelling page and the sample (``audit.html``, ``audit-sample.csv``) into folder ``out``.

    Raises:
        OSError: an image file of the sample cannot be read (its path is in the message).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    items: dict[str, dict] = {}
    for d in drawn:
        if d.unit.unit in items:  # one question about one image: asked once, answered for every gate that drew it
            items[d.unit.unit]["gates"].append(d.gate)
            continue
        items[d.unit.unit] = {"gates": [d.gate], "unit": d.unit.unit, "question": d.unit.question,
                              "asked": d.unit.asked, "prompt": d.unit.prompt, "group": d.unit.group,
                              "image": image_uri(d.unit.image)}
    ident = hashlib.sha256(json.dumps([seed, [(d.gate, d.unit.unit, d.unit.question) for d in drawn]]).encode())
    sample = {"id": ident.hexdigest()[:16], "seed": int(seed), "items": list(items.values())}
    blob = json.dumps(sample, separators=(",", ":")).replace("</", "<\\/")
    body = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>t2i-fairness audit {html.escape(title)}</title>
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<style>{_STYLE}</style></head><body>
<h1>Label the scorer's questions</h1>
<p>Answer each question about the image as a careful person would: <kbd>y</kbd> yes, <kbd>n</kbd> no,
<kbd>s</kbd> skip (cannot tell); <kbd>&larr;</kbd> back, <kbd>&rarr;</kbd> forward. Answers are kept in this
browser; come back any time. When done, save them and pass the file to <code>pytest --t2i-audit labels.csv</code>.</p>
<p id="progress"></p>
<div id="item"><p id="position"></p><img id="image" alt="the judged image"><p id="question"></p>
<p class="asked">How the scorer was asked: <span id="asked"></span></p>
<p class="asked">The image's prompt: <span id="prompt"></span></p><p id="current"></p></div>
<p id="finished" class="done" hidden>Every question is answered.</p>
<p><a id="save" download="labels.csv" href="#">Save labels (CSV)</a></p>
<script id="sample" type="application/json">{blob}</script>
<script>{_SCRIPT}</script>
</body></html>
"""
    page = out / PAGE
    page.write_text(body, encoding="utf-8")
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["seed", "gate", "unit", "group", "question", "prompt", "image"])
    for d in drawn:
        writer.writerow([seed, d.gate, d.unit.unit, d.unit.group, d.unit.question, d.unit.prompt, d.unit.image])
    sample_path = out / SAMPLE
    sample_path.write_text(buf.getvalue(), encoding="utf-8")
    return page, sample_path
