"""Listwise preference data (one prompt, K ranked or scored completions) expanded into weighted pairs.

A listwise row holds ``prompt``, ``completions`` (a list of K ≥ 2) and either ``ranking`` (completion indices,
best first: ``[2, 0, 1]`` means completion 2 is the best) or ``scores`` (one number per completion, higher is
better). It becomes every ordered (better, worse) pair, InstructGPT-style, each with weight 1/P for the P pairs of
its prompt, so every prompt counts once rather than C(K, 2) times. Ties in ``scores`` make no pair.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from datasets import Dataset

from trl_ext.core.preference import listwise_pair_weight

logger = logging.getLogger(__name__)

LISTWISE_COLUMN = "completions"


def is_listwise(column_names: Sequence[str]) -> bool:
    """True for a listwise dataset: it has a ``completions`` column and no ``chosen``/``rejected``."""
    return LISTWISE_COLUMN in column_names and "chosen" not in column_names


def expand_listwise(
    dataset: Dataset,
    margin_scale: float | None = None,
    normalize_weights: bool = False,
) -> Dataset:
    """Expand listwise rows into ``prompt``/``chosen``/``rejected``/``weight`` (+ ``margin``) pair rows.

    Args:
        dataset: rows with ``completions`` and exactly one of ``ranking`` / ``scores``; ``prompt`` is optional
            (implicit-prompt data), other columns are copied to every pair of the row.
        margin_scale: if set, each pair gets ``margin = margin_scale * (score_better - score_worse)``; needs
            ``scores``.
        normalize_weights: divide every weight by the mean weight over the dataset, so that a mean over pairs keeps
            the scale of an unweighted mean while each prompt still carries the same total weight.

    Rows whose scores all tie have no pair; they are dropped and counted in a warning. Malformed rows raise a
    ValueError naming the row index.
    """
    columns = dataset.column_names
    has_ranking, has_scores = "ranking" in columns, "scores" in columns
    if has_ranking == has_scores:
        raise ValueError(
            "Listwise data needs exactly one of the columns `ranking` (completion indices, best first) or `scores` "
            f"(one number per completion, higher is better); got columns {columns}."
        )
    if margin_scale is not None and not has_scores:
        raise ValueError("`margin_scale` makes margins from score gaps, so the listwise data needs a `scores` column.")
    extra = [name for name in columns if name not in (LISTWISE_COLUMN, "ranking", "scores")]
    pairs: dict[str, list[Any]] = {name: [] for name in [*extra, "chosen", "rejected", "weight"]}
    if margin_scale is not None:
        pairs["margin"] = []
    dropped = 0
    for index, row in enumerate(dataset):
        row_pairs = _row_pairs(row, index)
        if not row_pairs:
            dropped += 1
            continue
        weight = listwise_pair_weight(len(row_pairs))
        for better, worse in row_pairs:
            for name in extra:
                pairs[name].append(row[name])
            pairs["chosen"].append(row[LISTWISE_COLUMN][better])
            pairs["rejected"].append(row[LISTWISE_COLUMN][worse])
            pairs["weight"].append(weight)
            if margin_scale is not None:
                pairs["margin"].append(margin_scale * (row["scores"][better] - row["scores"][worse]))
    if dropped:
        logger.warning(
            "Dropped %d of %d listwise rows whose scores all tie (no pair to learn from).", dropped, len(dataset)
        )
    if not pairs["chosen"]:
        raise ValueError("The listwise dataset yields no pair: every row's scores tie.")
    if normalize_weights:
        mean_weight = sum(pairs["weight"]) / len(pairs["weight"])
        pairs["weight"] = [weight / mean_weight for weight in pairs["weight"]]
    return Dataset.from_dict(pairs)


def _row_pairs(row: dict[str, Any], index: int) -> list[tuple[int, int]]:
    """The (better, worse) completion indices of one row, every ordered pair once."""
    completions = row[LISTWISE_COLUMN]
    if not isinstance(completions, list) or len(completions) < 2:
        count = len(completions) if isinstance(completions, list) else type(completions).__name__
        raise ValueError(f"Listwise row {index}: `completions` must be a list of at least 2 completions, got {count}.")
    num_items = len(completions)
    if "ranking" in row:
        ranking = row["ranking"]
        if not isinstance(ranking, list) or sorted(ranking) != list(range(num_items)):
            raise ValueError(
                f"Listwise row {index}: `ranking` must be a permutation of 0..{num_items - 1} (completion indices, "
                f"best first), got {ranking!r}."
            )
        return [(ranking[i], ranking[j]) for i in range(num_items) for j in range(i + 1, num_items)]
    scores = row["scores"]
    if not isinstance(scores, list) or len(scores) != num_items:
        count = len(scores) if isinstance(scores, list) else type(scores).__name__
        raise ValueError(f"Listwise row {index}: `scores` has {count} entries but there are {num_items} completions.")
    if any(score is None or score != score for score in scores):
        raise ValueError(f"Listwise row {index}: `scores` contains a missing value (None or NaN): {scores!r}.")
    order = sorted(range(num_items), key=lambda i: -scores[i])
    return [
        (order[i], order[j])
        for i in range(num_items)
        for j in range(i + 1, num_items)
        if scores[order[i]] > scores[order[j]]
    ]
