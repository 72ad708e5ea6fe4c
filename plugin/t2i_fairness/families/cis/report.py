"""Components Inclusion Score's report pieces: CIS and the scorer ceiling against K, the rate lists, the
order tests' section and record."""

from __future__ import annotations

from t2i_fairness.families.cis.options import EXTREMES  # noqa: F401  (components listed as most ignored / prominent)


def cis_figure(ks, model, ceiling, inception):
    """CIS_K and the scorer ceiling against K; Inception Score against K beside it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(8, 3.2))
    ax.plot(ks, model, "o-", label="model CIS$_K$")
    ax.plot(ks, ceiling, "s--", label="ceiling (tiled single-component images)")
    ax.set_xticks(ks)
    ax.set_xlabel("components K")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("Components Inclusion Score")
    ax.legend(fontsize=7, loc="lower left")
    bx.errorbar(ks, [s.mean for s in inception], yerr=[s.std for s in inception], fmt="o-")
    bx.set_xticks(ks)
    bx.set_xlabel("components K")
    bx.ticklabel_format(axis="y", useOffset=False)
    bx.set_title("Inception Score")
    fig.tight_layout()
    return fig


def fmt_rate(r) -> str:
    return f"{r.component} {r.rate:.2f} ({r.detected}/{r.requested})"


def _power_text(p) -> str:
    if not p.reachable:
        return (f"0 at {p.prompts} prompts x {p.images} images, K={p.k}: the smallest p this design can give is "
                f"{p.floor:.2g} > {p.level:.2g}")
    return f"{p.power:.3f} at {p.prompts} prompts x {p.images} images, K={p.k} ({p.runs} simulated studies)"


def _p_text(r) -> str:
    if not r.resamples:
        return f"asymptotic chi-square p = {r.asymptotic_pvalue:.4g}"
    return (f"permutation p = {r.pvalue:.4g} ({r.resamples} within-prompt permutations, resolution "
            f"{r.resolution:.2g}; asymptotic chi-square p = {r.asymptotic_pvalue:.4g})")


def order_lines(study, tests, level_text: str, paper_text: str) -> list[str]:
    """The order section: sizes, CIS of both sets, inclusion by position, each test and the power.

    Args:
        study: the :class:`~t2i_fairness.families.cis.study.OrderStudy`.
        tests: its :class:`~t2i_fairness.families.cis.study.OrderTests`.
        level_text: how the run's level reads ("alpha 0.05 over 6 gate(s)").
        paper_text: how the paper preset's level reads.
    """
    from t2i_fairness.metrics.cis import ORDER_EFFECT

    orig, shuf, k = study.original, study.shuffled, study.k
    m, n = len(orig.prompts), int(orig.scores.shape[1])
    pos, paper, counts = tests.position, tests.paper, tests.counts
    mark = {name: " [the gate]" if tests.chosen == name else "" for name in ("position", "paper")}
    return [
        f"K={k}: {m} prompts x {n} images per group; {study.unchanged} of {m} shuffles left the order unchanged",
        f"CIS_{k}: original {orig.cis:.3f}, shuffled {shuf.cis:.3f} (each prompt's images against its own table, "
        f"as the paper; {study.shuffled_on_original.cis:.3f} against the original prompt's table)",
        f"inclusion by position 1..{k} minus the mean over positions (within prompts; the shuffled images scored "
        f"against the original prompt's table): " + " ".join(f"{x:+.3f}" for x in pos.profile),
        f"position test{mark['position']}: T = {pos.statistic:.3f} ({pos.dof} df), {_p_text(pos)}; "
        f"{pos.informative} of {m} prompts informative",
        f"power of the position test against the first-named component drawn {ORDER_EFFECT:g} more often than the "
        f"last-named (linear in between, added to this run's inclusion rates): {_power_text(tests.power)}, at this "
        f"run's level {tests.power.level:.3g} ({level_text}); at the paper's size, {_power_text(tests.paper_power)}, "
        f"at the paper preset's level {tests.paper_power.level:.3g} ({paper_text}); each study judged by T's "
        "chi-square reference (docs/calibration.md measures it against the permutation p)",
        f"chi-square by component (the paper's statistic, its X2(996, N=175918) = 1006.76, p = .399){mark['paper']}: "
        + (f"X2({paper.dof}, N={int(paper.table.sum())}) = {paper.statistic:.3f}, {_p_text(paper)}" if paper.dof
           else "undefined (fewer than two components detected)"),
        f"as the paper scores (each group against its own prompt's table, so CLIP's sensitivity to the wording "
        f"moves it too): position T = {tests.wording.statistic:.3f} ({tests.wording.dof} df), {_p_text(tests.wording)}",
        f"chi-square on components detected per image (2 x {len(counts.columns)}), no power against an order effect "
        "(the shuffles are uniform, so both groups expect the same counts under any position effect): "
        + (f"X2({counts.dof}, N={int(counts.table.sum())}) = {counts.statistic:.3f}, asymptotic p = {counts.pvalue:.4g}"
           if counts.dof else "undefined (one column)"),
    ]


def order_record(study, tests) -> dict:
    """The order tests as the JSON artifact ``cis_order_invariance`` records them."""
    from t2i_fairness.metrics.cis import ORDER_EFFECT

    orig, shuf, pos, paper = study.original, study.shuffled, tests.position, tests.paper

    def power(p) -> dict:
        return {"power": p.power, "level": p.level, "reachable": p.reachable, "floor": p.floor, "prompts": p.prompts,
                "images": p.images, "k": p.k, "runs": p.runs}

    return {
        "k": study.k, "prompts": len(orig.prompts), "images_per_prompt": int(orig.scores.shape[1]),
        "unchanged_shuffles": study.unchanged, "cis_original": orig.cis, "cis_shuffled": shuf.cis,
        "cis_shuffled_original_table": study.shuffled_on_original.cis, "test": tests.chosen,
        "position_test": {"statistic": pos.statistic, "dof": pos.dof, "pvalue": pos.pvalue if pos.resamples else None,
                          "resamples": pos.resamples, "resolution": pos.resolution if pos.resamples else None,
                          "asymptotic_pvalue": pos.asymptotic_pvalue, "informative_prompts": pos.informative,
                          "min_exact_pvalue": pos.min_exact_pvalue, "profile": pos.profile.tolist()},
        "power": {"effect_first_minus_last": ORDER_EFFECT, "method": tests.power.method, "run": power(tests.power),
                  "paper_size": power(tests.paper_power)},
        "by_component_test": {"statistic": paper.statistic, "dof": paper.dof,
                              "pvalue": paper.pvalue if paper.resamples else None,
                              "asymptotic_pvalue": paper.asymptotic_pvalue, "n": int(paper.table.sum())},
        "own_table_position_test": {"statistic": tests.wording.statistic, "dof": tests.wording.dof,
                                    "asymptotic_pvalue": tests.wording.asymptotic_pvalue},
        "counts_test_no_power": {"statistic": tests.counts.statistic, "dof": tests.counts.dof,
                                 "asymptotic_pvalue": tests.counts.pvalue if tests.counts.dof else None,
                                 "original_counts": orig.counts, "shuffled_counts": shuf.counts},
    }
