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


def region_lines(scores: dict, truncation=None) -> list[str]:
    """One summary line per region: precision, coverage and the group sizes (generated images scored, and
    duplicates dropped when there were any); then the generator's truncation of the prompts, when given."""
    from t2i_fairness.references.grouping import truncation_line

    lines = [f"{r:<16} precision {s.precision:.3f}  coverage {s.coverage:.3f}  (real {s.n_real}, generated {s.n_fake}"
             + (f", {s.n_duplicates} duplicates dropped" if getattr(s, "n_duplicates", 0) else "") + ")"
             for r, s in scores.items()]
    return lines + ([truncation_line(truncation)] if truncation is not None else [])


LOWEST_GRID_IMAGES = 8  # one row of report.grids.image_grid (8 columns); neither DIG In's paper nor its code fixes a number


def lowest_scoring(scored, n: int = LOWEST_GRID_IMAGES) -> list:
    """The ``n`` lowest-scoring images for a consistency gate's grid, lowest first; on a tie at the cut
    the image listed first is shown (a stable sort).

    Example:
        >>> from types import SimpleNamespace as S
        >>> [s.score for s in lowest_scoring([S(score=v) for v in (0.3, 0.1, 0.2)], 2)]
        [0.1, 0.2]
    """
    return sorted(scored, key=lambda s: s.score)[:n]
