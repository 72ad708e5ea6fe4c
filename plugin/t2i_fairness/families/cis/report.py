"""Components Inclusion Score's report pieces: CIS and the scorer ceiling against K, the rate lists."""

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
