"""The training-curve plot of a model card."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

PLOT_FILE = "training_curves.png"
PLOTTED_METRICS = ("reward", "kl", "completions/mean_length")


def plot_training_curves(log_history: list[dict[str, Any]], path: str | os.PathLike) -> bool:
    """Write a PNG of reward, KL and completion length against the step; False if nothing was logged."""
    series = {key: [(e["step"], e[key]) for e in log_history if isinstance(e.get(key), int | float) and "step" in e]
              for key in PLOTTED_METRICS}  # fmt: skip
    series = {key: points for key, points in series.items() if points}
    if not series:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(series), figsize=(4.2 * len(series), 3.2), squeeze=False)
    for axis, (key, points) in zip(axes[0], series.items(), strict=True):
        axis.plot(*zip(*points, strict=True), marker="." if len(points) < 50 else None)
        axis.set_title(key)
        axis.set_xlabel("step")
        axis.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return True


def try_plot(log_history: list[dict[str, Any]], path: Path) -> bool:
    """``plot_training_curves``, or False when matplotlib (the optional `plot` extra) is missing."""
    try:
        return plot_training_curves(log_history, path)
    except ImportError:  # matplotlib is the optional `plot` extra
        return False
