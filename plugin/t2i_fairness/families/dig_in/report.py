"""DIG In's report pieces: the per-region bars (Figure 2) and the summary block."""

from __future__ import annotations

import numpy as np


def region_bars(title: str, scores: dict):
    """Precision and coverage per region, side by side (DIG In Figure 2)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    regions = list(scores)
    x = np.arange(len(regions))
    fig, ax = plt.subplots(figsize=(1.2 * len(regions) + 2, 3.2))
    ax.bar(x - 0.2, [scores[r].precision for r in regions], 0.4, label="precision")
    ax.bar(x + 0.2, [scores[r].coverage for r in regions], 0.4, label="coverage")
    ax.set_xticks(x, [r.replace("_", "\n") for r in regions])
    ax.set_ylim(0, 1)
    ax.set_title(title)
    ax.legend(loc="upper right", fontsize=8)
    return fig


def region_lines(scores: dict) -> list[str]:
    """One summary line per region: precision, coverage and the group sizes."""
    return [f"{r:<16} precision {s.precision:.3f}  coverage {s.coverage:.3f}  (real {s.n_real}, generated {s.n_fake})"
            for r, s in scores.items()]
