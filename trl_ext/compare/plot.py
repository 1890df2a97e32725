"""The comparison plot: small multiples, each recipe against GRPO by optimizer steps and by generated samples
(``trl_ext.compare.figure``)."""

from __future__ import annotations

from pathlib import Path

from trl_ext.compare.figure import plot_small_multiples


def plot_comparison(runs: list[dict], recipes: tuple[str, ...], path: Path) -> None:
    """Each recipe against GRPO (else the first recipe): accuracy by steps and by samples, mean and min-max band."""
    plot_small_multiples(runs, recipes, path)
