"""Word-level explanations' report pieces: the per-word table, the representation table, Figure 3's bars."""

from __future__ import annotations

import numpy as np

from t2i_fairness.families.word_influence.study import WordInfluence, WordLevelResult

TITLE = "Word influence"
REPRESENTATION_TITLE = "Word influence: representation per prompt (|p(g) - 1/|groups||)"
PER_PROMPT_TABLES_UP_TO = 10  # prompts; beyond, only the averaged table goes in the summary (all in the JSON)


def table_lines(result: WordLevelResult, *, per_prompt: bool = True) -> list[str]:
    """The per-word table: word, group, k, influence, Hoeffding +-, bootstrap [lo, hi], images, prompts.

    The averaged (gated) rows first; with ``per_prompt``, each prompt's own rows after them.
    """
    conf = f"{100 * result.confidence:g}%"
    head = ("word", "group", "k", "influence", f"hoeffding {conf}", f"bootstrap {conf}", "n", "prompts")

    def fmt(r: WordInfluence) -> tuple[str, ...]:
        boot = "-" if r.bootstrap is None else f"[{r.bootstrap[0]:+.3f}, {r.bootstrap[1]:+.3f}]"
        return (r.word, r.group, str(r.k), f"{r.influence:+.3f}", f"+-{r.hoeffding:.3f}", boot, str(r.n_images),
                str(len(r.prompts)))

    def block(rows: list[tuple[str, ...]]) -> list[str]:
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines = []
        for j, row in enumerate(rows):
            lines.append("  ".join(c.rjust(widths[i]) if 2 <= i <= 6 else c.ljust(widths[i]) for i, c in enumerate(row)).rstrip())
            if j == 0:
                lines.append("  ".join("-" * w for w in widths))
        return lines

    lines = [
        "I_k(w) = mean over sets S of k-1 other words of p(g | S and w replaced) - p(g | S replaced);",
        "positive: replacing w raises the share of g (w pushes images away from g).",
        "Averaged over the prompts containing each word (Figure 3):",
    ]
    lines += block([head] + [fmt(r) for r in result.words])
    if per_prompt:
        for prompt in result.probabilities:
            lines.append("")
            ps = ", ".join(f"p({g})={result.probabilities[prompt][frozenset()][g]:.3f}" for g in result.groups)
            lines.append(f"{prompt!r} (original: {ps}):")
            lines += block([head[:-1]] + [fmt(r)[:-1] for r in result.per_prompt if r.prompts == (prompt,)])
    return lines


def representation_lines(result: WordLevelResult) -> list[str]:
    """p(g) of each original prompt, its gap from parity and the gap's Hoeffding interval."""
    conf = f"{100 * result.confidence:g}%"
    rows = [("prompt", "group", "p(g)", "|p - 1/G|", f"hoeffding {conf}", "n")]
    for r in result.representation:
        lo, hi = r.interval
        rows.append((r.prompt, r.group, f"{r.p:.3f}", f"{r.gap:.3f}", f"[{lo:.3f}, {hi:.3f}]", str(r.n_images)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = []
    for j, row in enumerate(rows):
        out.append("  ".join(c.ljust(widths[i]) if i < 2 else c.rjust(widths[i]) for i, c in enumerate(row)).rstrip())
        if j == 0:
            out.append("  ".join("-" * w for w in widths))
    return out


def show(study, t2i_report, full: bool = False) -> WordLevelResult:
    """Put the per-word table (with Hoeffding and bootstrap intervals) and the per-prompt representation of
    the prompts measured so far in the terminal summary; ``full=True`` measures every prompt and also
    attaches every number (JSON) and Figure 3's bars (PNG)."""
    result, s = (study.result if full else study.measured), study.settings
    lines = [f"{s.suite}: {len(s.prompts)} prompts, {s.m} replacements per set, {s.images_per_text} images per "
             f"candidate prompt ({s.images_per_distribution} per distribution), groups by CLIP {s.template!r}"]
    lines += table_lines(result, per_prompt=len(s.prompts) <= PER_PROMPT_TABLES_UP_TO)
    cut = study.truncation
    lines.append(f"generator's tokenizer: {cut.cell()} prompts truncated ({cut.encoder})" if cut.counted else
                 f"generator's tokenizer: truncation not counted ({cut.encoder})")
    t2i_report.section(TITLE, lines)
    t2i_report.section(REPRESENTATION_TITLE, representation_lines(result))
    if full:
        settings = vars(s) | {"prompts": list(s.prompts), "levels": {p: list(k) for p, k in s.levels.items()}}
        t2i_report.json("word_influence", {"settings": settings, **result.to_json(), "truncation": cut.details()})
        t2i_report.png("word_influence", influence_bars(result))
    return result


def influence_bars(result):
    """Figure 3 style: each word's average influence per group and level, with Hoeffding error bars
    (thin) and the bootstrap interval (thick)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels, groups = result.levels, result.groups
    words = list(dict.fromkeys(r.word for r in result.words))
    fig, axes = plt.subplots(1, len(levels), figsize=(4.5 * len(levels) + 1, 0.32 * len(words) * len(groups) + 1.5),
                             squeeze=False, sharey=True)
    height = 0.8 / len(groups)
    for ax, k in zip(axes[0], levels):
        for j, group in enumerate(groups):
            rows = {r.word: r for r in result.words if r.k == k and r.group == group}
            y = np.arange(len(words)) + (j - (len(groups) - 1) / 2) * height
            vals = [rows[w].influence if w in rows else np.nan for w in words]
            err = [rows[w].hoeffding if w in rows else 0.0 for w in words]
            ax.barh(y, vals, height, xerr=err, label=group, error_kw={"lw": 0.8, "capsize": 2})
            for yy, w in zip(y, words):
                if w in rows and rows[w].bootstrap is not None:
                    ax.plot(rows[w].bootstrap, [yy, yy], color="black", lw=2.5, solid_capstyle="butt")
        ax.axvline(0, color="grey", lw=0.6)
        ax.set_xlim(-1, 1)
        ax.set_title(f"k = {k}")
        ax.set_xlabel("average influence")
    axes[0][0].set_yticks(np.arange(len(words)), words)
    axes[0][0].invert_yaxis()
    axes[0][-1].legend(loc="lower right", fontsize=8)
    fig.suptitle("Word influence on each group's share (+: the word pushes images away from the group)\n"
                 f"thin: Hoeffding {100 * result.confidence:g}%, thick: bootstrap", fontsize=9)
    fig.tight_layout()
    return fig


def report_gate(ind, t2i_report) -> dict:
    """A gate's report: the per-word and representation tables (:func:`show`) on the study its indicator was
    measured on; returns the gate's details: what it rests on, CLIP's group judgements of its images, and
    their agreement with labels where the images carry them (:func:`~t2i_fairness.report.judged.scorer_agreement`)."""
    from t2i_fairness.report.judged import scorer_agreement

    show(ind.at, t2i_report)
    details = ind.details or {}
    group = details.get("group")
    prompts = ind.at.word_prompts(details["word"], details["k"]) if "word" in details else [details.get("prompt")]
    judged = ind.at.judgements([p for p in prompts if p], group)
    scorer = scorer_agreement(judged, f"word-level group {group}", t2i_report, "word_agreement", focus=group, unit="group")
    return {"scorer": scorer}
