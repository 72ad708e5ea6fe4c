"""What the IndicTTI gates show people: the per-language table, the drops relative to English, the
SCAL heatmap (the paper's Figure 3) and a JSON of every number, as pure functions of an
:class:`IndicSummary` (tested without a generator).
"""

from __future__ import annotations

import io
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np

from t2i_fairness.vocab.languages import ENGLISH, get_language
from t2i_fairness.metrics.indic import mean_relative_to_english, relative_to_english, scal_overall

__all__ = ["DROP_METRICS", "TITLE", "IndicSummary", "lang_code_short", "scal_heatmap_png", "summary_json", "summary_lines"]

TITLE = "IndicTTI per language"
COLUMNS = (("clgc", "CLGC"), ("igc", "IGC"), ("lgc", "LGC"), ("scwl", "SCWL"), ("dwl", "DWL"))
DROP_METRICS = tuple(key for key, _ in COLUMNS)


@dataclass
class IndicSummary:
    """The numbers of one IndicTTI run (fractions, as gated; the paper prints x100).

    Attributes:
        note: the prompt file's first comment line (the smoke sample says it is a SAMPLE), or ``""``.
        scores: language -> {"clgc", "igc", "lgc", "scwl", "dwl"} -> value or ``None``, for the
            languages measured so far (a ``-k`` run measures only what its gates need).
        scal_matrix: SCAL of every pair of ``languages``, once every language is measured.
        models: role -> fingerprint of the model that served it.
        truncation: language -> the generator's truncation of its prompts.
    """

    source: str
    languages: tuple[str, ...]
    n_prompts: int
    n_images: int
    profile: str
    scores: dict[str, dict[str, float | None]]
    scal_with_english: dict[str, float] = field(default_factory=dict)
    scal_matrix: list[list[float]] | None = None
    models: dict[str, str] = field(default_factory=dict)
    sentence_model: str | None = None
    note: str = ""
    igc_note: str | None = None
    truncation: dict[str, dict] = field(default_factory=dict)

    @classmethod
    def from_evaluation(cls, ev, include_matrix: bool = False) -> "IndicSummary":
        """The numbers ``ev`` holds; ``include_matrix`` measures every language and fills the SCAL matrix."""
        matrix = None
        if include_matrix:
            for code in ev.languages:
                ev.scores(code)
            matrix = ev.scal_matrix().tolist()
        measured = ev.measured
        scal_en = {}
        if ENGLISH in measured:
            scal_en = {code: ev.scal(ENGLISH, code) for code in measured if code != ENGLISH}
        igc_note = None
        if not ev.reference_ids:
            igc_note = (f"IGC not measured: no prompt in {ev.prompts.source} has a 'reference_image' "
                        "(IGC compares each prompt's reference image with its generated images)")
        elif len(ev.reference_ids) < len(ev.prompt_ids):
            igc_note = (f"IGC over the {len(ev.reference_ids)} of {len(ev.prompt_ids)} prompt ids that have a "
                        "'reference_image'")
        return cls(
            source=str(ev.prompts.source), languages=tuple(ev.languages), n_prompts=len(ev.prompt_ids),
            n_images=ev.n_images, profile=ev.models.profile,
            scores={code: ev.scores(code).as_dict() for code in measured},
            scal_with_english=scal_en, scal_matrix=matrix, models=dict(ev.models.used),
            sentence_model=ev.models.sentence_model, note=ev.prompts.comments[0] if ev.prompts.comments else "",
            igc_note=igc_note, truncation={code: ev.truncation(code).details() for code in measured},
        )

    # -- derived numbers -----------------------------------------------------------------------
    @property
    def measured(self) -> tuple[str, ...]:
        return tuple(code for code in self.languages if code in self.scores)

    def drops(self) -> dict[str, dict[str, float]]:
        """metric -> language -> English minus language (the paper's "drop"), where both are known."""
        out: dict[str, dict[str, float]] = {}
        if ENGLISH not in self.scores:
            return out
        for metric in DROP_METRICS:
            values = {code: s[metric] for code, s in self.scores.items() if s.get(metric) is not None}
            if ENGLISH in values and len(values) > 1:
                out[metric] = relative_to_english(values, mode="difference")
        return out

    def mean_drops(self) -> dict[str, float]:
        """metric -> English minus the mean of the other measured languages (Section 5's single number)."""
        out = {}
        for metric in DROP_METRICS:
            values = {code: s[metric] for code, s in self.scores.items() if s.get(metric) is not None}
            if ENGLISH in values and len(values) > 1:
                out[metric] = mean_relative_to_english(values, mode="difference")
        return out

    def clgc_ratios(self) -> dict[str, float | None]:
        """language -> CLGC(l) / CLGC(English); ``None`` when CLGC(English) <= 0 (undefined)."""
        english = self.scores.get(ENGLISH, {}).get("clgc")
        if english is None:
            return {}
        others = [code for code in self.scores if code != ENGLISH]
        if not others:  # English alone measured so far (its test ran first): no ratio yet
            return {}
        if english <= 0:
            return {code: None for code in others}
        return relative_to_english({c: self.scores[c]["clgc"] for c in [ENGLISH, *others]}, mode="ratio")

    def scal_overall(self) -> float | None:
        if self.scal_matrix is None or len(self.languages) < 2:
            return None
        return scal_overall(np.asarray(self.scal_matrix))


def _cell(value: float | None) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.4f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    fmt = lambda r: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
    return [fmt(header), "  ".join("-" * w for w in widths), *[fmt(r) for r in rows]]


def _label(code: str) -> str:
    return f"{code} {get_language(code).name}"


def summary_lines(s: IndicSummary) -> list[str]:
    """The terminal block: provenance, the per-language table, drops relative to English, notes.

    Example:
        >>> s = IndicSummary("p.jsonl", ("eng_Latn", "hin_Deva"), 2, 3, "tiny",
        ...     {"eng_Latn": {"clgc": 0.5, "igc": None, "lgc": 0.3, "scwl": 0.9, "dwl": 0.2},
        ...      "hin_Deva": {"clgc": 0.25, "igc": None, "lgc": 0.2, "scwl": 0.8, "dwl": 0.3}},
        ...     scal_with_english={"hin_Deva": 0.6})
        >>> print("\\n".join(summary_lines(s)[2:6]))
        language            CLGC  IGC     LGC    SCWL     DWL  SCAL(en,l)  CLGC/en
        ----------------  ------  ---  ------  ------  ------  ----------  -------
        eng_Latn English  0.5000    -  0.3000  0.9000  0.2000           -        -
        hin_Deva Hindi    0.2500    -  0.2000  0.8000  0.3000      0.6000   0.5000
    """
    lines = [
        f"prompts {s.source}: {s.n_prompts} prompt ids x {len(s.languages)} languages, {s.n_images} images per "
        f"prompt and language; scorers {s.profile}" + (f"; sentence model {s.sentence_model}" if s.sentence_model else ""),
    ]
    if s.note:
        lines.append(f"  {s.note}")
    lines.append("values are fractions (the paper prints x100); higher is better for all six")
    ratios = s.clgc_ratios()
    rows = []
    for code in s.measured:
        values = s.scores[code]
        scal = s.scal_with_english.get(code)
        ratio = ratios.get(code)
        ratio_cell = "-" if code == ENGLISH else ("undef" if code in ratios and ratio is None else _cell(ratio))
        rows.append([_label(code), *[_cell(values.get(k)) for k, _ in COLUMNS], _cell(scal), ratio_cell])
        if s.truncation:
            rows[-1] += _truncation_cells(s.truncation.get(code))
    extra = ["trunc", "lost max"] if s.truncation else []
    lines += _table(["language", *[name for _, name in COLUMNS], "SCAL(en,l)", "CLGC/en", *extra], rows)

    drops = s.drops()
    if drops:
        lines += ["", "drop relative to English (English minus the language, as the paper reports it; "
                      "positive = below English):"]
        metrics = [(k, name) for k, name in COLUMNS if k in drops]
        rows = [[_label(code), *[_cell(drops[k].get(code)) for k, _ in metrics]]
                for code in s.measured if code != ENGLISH]
        means = s.mean_drops()
        others = len([c for c in s.measured if c != ENGLISH])
        rows.append([f"mean of {others} language{'s' if others != 1 else ''}", *[_cell(means.get(k)) for k, _ in metrics]])
        lines += _table(["language", *[name for _, name in metrics]], rows)

    notes = []
    overall = s.scal_overall()
    if overall is not None:
        pairs = len(s.languages) * (len(s.languages) - 1) // 2
        notes.append(f"overall SCAL (mean over the {pairs} pair{'s' if pairs != 1 else ''} of distinct languages, "
                     f"Eq. 9): {overall:.4f}")
    if any(r is None for r in ratios.values()):
        notes.append(f"CLGC/en undefined: CLGC(English) = {s.scores[ENGLISH]['clgc']:.4f} <= 0")
    if s.igc_note:
        notes.append(s.igc_note)
    notes += _truncation_notes(s.truncation)
    unmeasured = [c for c in s.languages if c not in s.scores]
    if unmeasured:
        notes.append(f"not measured in this run (no selected gate needed them): {', '.join(unmeasured)}")
    if notes:
        lines += ["", *notes]
    if s.models:
        lines += ["models:", *[f"  {role}: {fp}" for role, fp in sorted(s.models.items())]]
    return lines


def _truncation_cells(t: dict | None) -> list[str]:
    if not t:
        return ["-", "-"]
    if "truncated_prompts" not in t:
        return ["n/c", "-"]
    return [f"{t['truncated_prompts']}/{t['prompts']}", str(t["max_lost_tokens"]) if t["truncated_prompts"] else "0"]


def _truncation_notes(truncation: dict[str, dict]) -> list[str]:
    """What the trunc / lost max columns mean, and which tokenizer counted."""
    if not truncation:
        return []
    counted = [t for t in truncation.values() if "truncated_prompts" in t]
    if not counted:
        why = next(iter(truncation.values())).get("tokenizer", "")
        return [f"trunc: prompts the generator's tokenizer truncates: not counted ({why})"]
    hit = {c: t for c, t in truncation.items() if t.get("truncated_prompts")}
    line = (f"trunc: prompts longer than the generator's context ({counted[0]['tokenizer']}), whose images come "
            "from a truncated prompt; lost max: the most tokens dropped from one prompt")
    if hit:
        worst = min(hit, key=lambda c: hit[c]["min_kept_fraction"])
        line += f"; worst {worst}: {hit[worst]['min_kept_fraction']:.0%} of a prompt kept"
    return [line]


def summary_json(s: IndicSummary) -> dict[str, Any]:
    """Every number of the run, JSON-ready: the summary plus drops, mean drops, CLGC ratios and overall SCAL."""
    data = asdict(s)
    data["languages"] = list(s.languages)
    data["drop_vs_english"] = s.drops()
    data["mean_drop_vs_english"] = s.mean_drops()
    data["clgc_ratio_vs_english"] = s.clgc_ratios()
    data["scal_overall"] = s.scal_overall()
    data["units"] = "fractions (the paper prints x100); drops are English minus the language"
    return data


def scal_heatmap_png(languages: Sequence[str], matrix: Sequence[Sequence[float]] | np.ndarray,
                     title: str = "SCAL across language pairs (IndicTTI, Fig. 3)") -> bytes:
    """The SCAL matrix as a heatmap, PNG bytes (matplotlib's Agg canvas; no display needed).

    Raises:
        ValueError: ``matrix`` is not (n_languages, n_languages).

    Example:
        >>> png = scal_heatmap_png(["eng_Latn", "hin_Deva"], [[1.0, 0.5], [0.5, 1.0]])
        >>> png[:8] == b"\\x89PNG\\r\\n\\x1a\\n"
        True
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    values = np.asarray(matrix, dtype=float)
    size = len(languages)
    if values.shape != (size, size):
        raise ValueError(f"expected `matrix` of shape ({size}, {size}) for {size} languages, but got shape {values.shape}")
    side = max(4.0, 0.45 * size + 2.0)
    fig = Figure(figsize=(side + 1.2, side))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    # The colour scale spans the data (as Figure 3's panels do): SCAL values often differ in the 2nd decimal.
    low, high = float(values.min()), float(values.max())
    image = ax.imshow(values, cmap="viridis", vmin=low, vmax=high if high > low else low + 1e-6)
    ax.set_xticks(range(size), [lang_code_short(c) for c in languages], rotation=90)
    ax.set_yticks(range(size), [lang_code_short(c) for c in languages])
    if size <= 12:
        for i in range(size):
            for j in range(size):
                light = high > low and (values[i, j] - low) / (high - low) > 0.6
                ax.text(j, i, f"{100 * values[i, j]:.1f}", ha="center", va="center", fontsize=7,
                        color="black" if light else "white")
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="SCAL (mean cosine; cells x100)")
    ax.set_title(title, fontsize=10)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return buf.getvalue()


def lang_code_short(code: str) -> str:
    """``hin_Deva`` -> ``hin (Deva)``, the paper's axis labels."""
    lang, _, script = code.partition("_")
    return f"{lang} ({script})"


def show(indic, t2i_report, full: bool = False) -> IndicSummary:
    """Put the per-language table (languages measured so far) in the terminal summary and return the
    :class:`IndicSummary`; ``full=True`` measures every language, adds the SCAL matrix and attaches its
    heatmap (PNG) and all numbers (JSON)."""
    summary = IndicSummary.from_evaluation(indic, include_matrix=full)
    t2i_report.section(TITLE, summary_lines(summary))
    if full:
        t2i_report.json("indic_tti_metrics", summary_json(summary))
        t2i_report.png("scal_matrix", scal_heatmap_png(summary.languages, summary.scal_matrix))
    return summary


def report_gate(ind, t2i_report) -> None:
    """A gate's report: the per-language table (:func:`show`) on the study its indicator was measured on."""
    show(ind.at, t2i_report)
