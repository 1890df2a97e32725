"""The comparison plot: training accuracy against generated samples, one line per recipe, a band over seeds."""

from __future__ import annotations

from pathlib import Path

from trl_ext.compare.summary import curve, smoothed


def plot_comparison(runs: list[dict], recipes: tuple[str, ...], path: Path) -> None:
    """Smoothed training accuracy against generated samples: the mean over seeds, with a min-max band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    figure, axis = plt.subplots(figsize=(7, 4.2))
    for recipe in recipes:
        curves = [curve(run)[:2] for run in runs if run["recipe"] == recipe]
        curves = [(np.array(x), np.array(smoothed(y))) for x, y in curves if len(x) > 1]
        if not curves:
            continue
        grid = np.linspace(max(c[0][0] for c in curves), min(c[0][-1] for c in curves), 100)
        stacked = np.stack([np.interp(grid, x, y) for x, y in curves])
        (line,) = axis.plot(grid, stacked.mean(axis=0), label=recipe)
        axis.fill_between(grid, stacked.min(axis=0), stacked.max(axis=0), color=line.get_color(), alpha=0.2)
    axis.set_xlabel("generated samples")
    axis.set_ylabel("training accuracy (share correct, smoothed)")
    axis.grid(alpha=0.3)
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
