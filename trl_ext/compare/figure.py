"""The comparison figure: small multiples, each recipe against a baseline (GRPO) on the same axes.

One row per recipe, two panels: accuracy by optimizer steps and by generated samples (refill rounds included). Each
panel draws the baseline in grey and the recipe in colour: the mean over seeds with a min-max band. The accuracy is
the held-out accuracy recorded during training (``--eval_every``) when the runs have it, else the smoothed training
accuracy. Each row's title says whether the final held-out accuracies separate (``trl_ext.compare.separation``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trl_ext.compare.separation import versus
from trl_ext.compare.summary import curve, smoothed

BASELINE = "grpo"


def run_points(run: dict) -> tuple[str, list[tuple[float, float, float]]]:
    """(what is measured, [(optimizer step, generated samples, accuracy)]) of one run: held-out accuracy when
    recorded at two or more points, else the smoothed training accuracy of the logged steps."""
    heldout = run.get("heldout") or []
    if len(heldout) >= 2:
        return "held-out accuracy", [(r["step"], r["samples"], r["heldout_accuracy"]) for r in heldout]
    samples, accuracy, _ = curve(run)
    key = "math_accuracy/correct" if any("math_accuracy/correct" in r for r in run["log"]) else "reward"
    steps = [r["step"] for r in run["log"] if key in r]
    return "training accuracy (smoothed)", list(zip(steps, samples, smoothed(accuracy), strict=True))


def _band(axis: Any, curves: list[tuple[Any, Any]], color: str, label: str) -> None:
    import numpy as np

    curves = [(np.asarray(x, float), np.asarray(y, float)) for x, y in curves if len(x) > 1]
    if not curves:
        return
    grid = np.linspace(max(x[0] for x, _ in curves), min(x[-1] for x, _ in curves), 60)
    stacked = np.stack([np.interp(grid, x, y) for x, y in curves])
    axis.plot(grid, stacked.mean(axis=0), color=color, label=label, linewidth=1.6)
    axis.fill_between(grid, stacked.min(axis=0), stacked.max(axis=0), color=color, alpha=0.2, linewidth=0)


def plot_small_multiples(runs: list[dict], recipes: tuple[str, ...], path: Path) -> None:
    """Write the figure: one row per recipe other than the baseline (GRPO, else the first recipe)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    baseline = BASELINE if BASELINE in recipes else recipes[0]
    others = [r for r in recipes if r != baseline] or [baseline]
    figure, axes = plt.subplots(len(others), 2, figsize=(8.5, 2.1 * len(others) + 0.6), sharey=True, squeeze=False)
    points = {id(run): run_points(run) for run in runs}
    measured = {points[id(run)][0] for run in runs}
    for row, recipe in enumerate(others):
        for column, x_index in enumerate((0, 1)):
            axis = axes[row][column]
            for name, color in ((baseline, "0.45"), (recipe, f"C{row % 10}")):
                curves = [([p[x_index] for p in points[id(r)][1]], [p[2] for p in points[id(r)][1]])
                          for r in runs if r["recipe"] == name]  # fmt: skip
                _band(axis, curves, color, name)
            axis.grid(alpha=0.3)
            axis.set_xlabel("optimizer steps" if x_index == 0 else "generated samples")
            if column == 0:
                axis.set_ylabel(recipe, fontsize=11, fontweight="bold")
                axis.legend(loc="lower right", fontsize=8)
        result = versus(runs, recipe, baseline)
        title = f"{recipe} vs {baseline}"
        if result is not None:
            title += (f": final held-out {result.mean_a:.2f} vs {result.mean_b:.2f}, better in {result.wins} of "
                      f"{result.seeds} seeds, {result.verdict}")  # fmt: skip
        axes[row][0].set_title(title, loc="left", fontsize=9)
    figure.suptitle(f"{' / '.join(sorted(measured))}: mean over seeds, band min-max", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
