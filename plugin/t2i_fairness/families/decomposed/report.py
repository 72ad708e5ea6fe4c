"""Decomposed-DIG's report pieces: Table 1, and the diagnostics of Sec. 4.3 as JSON and image grids."""

from __future__ import annotations

from typing import Iterable, Mapping

from t2i_fairness.families.decomposed.study import (DECOMPOSED_TEMPLATES, TEMPLATE_LABELS, DecomposedReal,
                                                    DecomposedScores)


def diagnostics_report(real: DecomposedReal, scores: DecomposedScores, diags: dict) -> dict:
    """JSON-ready: which images, with their labels, for every region."""
    report = {}
    for region, (d, region_rows) in diags.items():
        def real_entry(j, **extra):
            it = real.items[int(region_rows[j])]
            return {"image": it.label, "object": it.object, **extra}

        report[region] = {
            "low_diversity_backgrounds": [real_entry(j, covered_full=c) for j, c in zip(d.low_diversity_backgrounds, d.covered_full)],
            "low_diversity_objects": [real_entry(j) for j in d.low_diversity_objects],
            "low_realism_backgrounds": [{"image": scores.items[i].label, "object": scores.items[i].object}
                                        for i in d.low_realism_backgrounds],
            "crowded_backgrounds": [real_entry(j, generated_in_ball=n) for j, n in d.crowded_backgrounds],
        }
    return report


def diagnostics_grids(real: DecomposedReal, scores: DecomposedScores, diags: dict, store, per_row: int = 6) -> dict[str, bytes]:
    """One PNG per failure mode: a row per region, images with their object mask outlined in red."""
    from t2i_fairness.families.decomposed.rules import mask_grid

    def tile(item, note=""):
        return item.load(), store.get(item), item.object.replace("_", " ") + note

    grids = {}
    for kind in ("low_diversity_backgrounds", "low_diversity_objects", "low_realism_backgrounds", "crowded_backgrounds"):
        rows = []
        for region, (d, region_rows) in diags.items():
            picked = getattr(d, kind)[:per_row]
            if kind == "low_realism_backgrounds":
                tiles = [tile(scores.items[i]) for i in picked]
            elif kind == "crowded_backgrounds":  # caption: generated backgrounds in the ball
                tiles = [tile(real.items[int(region_rows[j])], f" ({n})") for j, n in picked]
            else:
                tiles = [tile(real.items[int(region_rows[j])]) for j in picked]
            if tiles:
                rows.append((region, tiles))
        if rows:
            grids[kind] = mask_grid(rows)
    return grids


def table1_section(name: str, ref, real: DecomposedReal, by_template: dict[str, DecomposedScores], limit_source: str) -> list[str]:
    """The terminal summary block: segmentation bookkeeping, then Table 1."""
    from t2i_fairness.families.decomposed.rules import summarize, table1_lines

    sel = real.selection
    lines = []
    if ref.synthetic:
        lines.append(f"{name}: SYNTHETIC stand-in reference data; these numbers say nothing about real-world fairness")
    excluded = ", ".join(f"{o} ({r:.0%})" for o, r in sel.excluded_classes.items()) or "none"
    lines.append(f"real images: {sel.failed.size}, segmentation failed (excluded): {int(sel.failed.sum())}; "
                 f"classes excluded (more than {sel.limit_text} = {float(sel.limit):.1%} failures, {limit_source} "
                 f"limit): {excluded}")
    below = int(sel.below_bg_min.sum())
    if sel.min_bg_patches > 1:
        lines.append(f"real images with fewer than {sel.min_bg_patches} background patches (left out of BG-only): {below}")
    for template, sc in by_template.items():
        n = sum(len(r) for r in sc.groups.values())
        dropped = sum(sc.dropped.values())
        whole = "whole image in BG-only" if sc.bg_unsegmented == "whole" else "misses in BG-only too"
        lines.append(f"{TEMPLATE_LABELS.get(template, template)}: {n} generated images"
                     + (f" ({dropped} more of excluded classes left out)" if dropped else "")
                     + f", {sum(sc.unsegmented.values())} without object segmentation "
                     f"(misses in Obj-only, {whole})"
                     + (f", {sum(sc.bg_short.values())} with fewer than {sel.min_bg_patches} background patches "
                        "(BG-only misses)" if sel.min_bg_patches > 1 else "")
                     + (f"; regions without scores: {', '.join(sc.skipped)}" if sc.skipped else ""))
        if sc.truncation is not None and (not sc.truncation.counted or sc.truncation.truncated):
            from t2i_fairness.references.grouping import truncation_line

            lines.append(f"  {truncation_line(sc.truncation)}")
    usable = {t: sc for t, sc in by_template.items() if sc.scores}
    if "object_in_region" not in usable:
        return lines + ["no Table 1: no region of {object} in {region} has scores"]
    summaries = {t: summarize(sc.per_region()) for t, sc in usable.items()}
    new = "regional_adjective" if "regional_adjective" in usable else None
    lines += table1_lines(summaries, "object_in_region", new, TEMPLATE_LABELS)
    worst = "; ".join(f"{label} worst BG coverage: {summaries[t]['bg']['coverage']['worst_region']}"
                      for label, t in (("Orig.", "object_in_region"), ("New", new)) if t)
    return lines + [f"  {worst}"]


def report_table1(ind, reference: str, selected: Iterable[Mapping], t2i_report) -> None:
    """Table 1 (a report section and ``decomposed_dig.json``), measured at the look where its gate stopped.

    It covers the templates one of the ``selected`` tests reads every region of; a selection of one
    region's gates shows that region's table alone, computing nothing more.
    """
    from t2i_fairness.families.decomposed.rules import summarize

    if ind.undefined is not None:
        return
    study, regions = ind.at, _selected_regions(reference, selected)
    templates = [t for t in DECOMPOSED_TEMPLATES if t in regions]
    if not templates:
        return
    by_template = {t: study.scores(reference, t, next(iter(regions[t])) if len(regions[t]) == 1 else None)
                   for t in templates}
    real = study.real(reference)
    lines = table1_section(reference, study.reference_sets[reference], real, by_template, study.options.limit_source)
    t2i_report.section(f"Decomposed-DIG (Table 1): {reference}", lines)
    t2i_report.json("decomposed_dig", {
        "reference": reference,
        "real_images": real.selection.report(),
        "templates": {t: dict(sc.report(), summary=summarize(sc.per_region()) if sc.scores else None)
                      for t, sc in by_template.items()},
    })


def _selected_regions(reference: str, selected: Iterable[Mapping]) -> dict[str, set]:
    """Template -> the regions its selected tests of ``reference`` read (``None``: every region)."""
    regions: dict[str, set] = {}
    for params in selected:
        if params.get("reference") != reference:
            continue
        for t in [params["template"]] if "template" in params else DECOMPOSED_TEMPLATES:
            regions.setdefault(t, set()).add(params.get("region"))
    return regions


def report_diagnostics(study, reference: str, template: str, t2i_report) -> dict:
    """Sec. 4.3's diagnostics of every region: ``diagnostics.json``, one image grid per failure mode and a
    summary block of counts; returns them (region -> (diagnostics, the region's real rows))."""
    sc, real = study.scores(reference, template), study.real(reference)
    diags = study.diagnostics(reference, template)
    t2i_report.json("diagnostics", diagnostics_report(real, sc, diags))
    for kind, png in diagnostics_grids(real, sc, diags, study.models()[1]).items():
        t2i_report.png(kind, png)
    t2i_report.section(f"Decomposed-DIG diagnostics: {reference} / {template}", [
        f"{region:<16} low-diversity backgrounds {len(d.low_diversity_backgrounds):>3}  "
        f"low-diversity objects {len(d.low_diversity_objects):>3}  "
        f"low-realism backgrounds {len(d.low_realism_backgrounds):>3}/{sc.scores[region]['bg'].n_used}"
        for region, (d, _) in diags.items()
    ])
    return diags
