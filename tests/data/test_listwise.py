"""Listwise expansion: all ordered pairs, weight 1/C(K, 2) per pair, margins from score gaps, row-indexed errors."""

from __future__ import annotations

import math

import pytest
from datasets import Dataset

from tests import reference_preference as ref
from trl_ext.data import expand_listwise, is_listwise

SCORED = {
    "prompt": ["p2", "p3", "p4", "tie"],
    "completions": [["a", "b"], ["c", "d", "e"], ["f", "g", "h", "i"], ["j", "k"]],
    "scores": [[0.0, 1.0], [2.0, 0.5, 1.0], [0.1, 0.4, 0.3, 0.2], [1.0, 1.0]],
    "source": ["s2", "s3", "s4", "st"],
}


def test_every_ordered_pair_once_with_weight_one_over_c_k_2():
    pairs = expand_listwise(Dataset.from_dict(SCORED))
    assert len(pairs) == math.comb(2, 2) + math.comb(3, 2) + math.comb(4, 2)  # the all-tie row has no pair
    for row_index, prompt in enumerate(SCORED["prompt"][:3]):
        rows = [row for row in pairs if row["prompt"] == prompt]
        completions, scores = SCORED["completions"][row_index], SCORED["scores"][row_index]
        want = {(completions[i], completions[j], w) for i, j, w in ref.listwise_pairs(scores)}
        assert {(row["chosen"], row["rejected"], row["weight"]) for row in rows} == want
        k = len(completions)
        assert all(row["weight"] == pytest.approx(1 / math.comb(k, 2)) for row in rows)
        assert sum(row["weight"] for row in rows) == pytest.approx(1.0)  # each prompt counts once
        assert {row["source"] for row in rows} == {SCORED["source"][row_index]}
    assert set(pairs.column_names) == {"prompt", "source", "chosen", "rejected", "weight"}


def test_normalized_weights_keep_the_mean_at_one_and_prompts_equal():
    pairs = expand_listwise(Dataset.from_dict(SCORED), normalize_weights=True)
    assert sum(pairs["weight"]) / len(pairs) == pytest.approx(1.0)
    totals = {p: sum(w for q, w in zip(pairs["prompt"], pairs["weight"]) if q == p) for p in ["p2", "p3", "p4"]}
    assert totals["p2"] == pytest.approx(totals["p3"]) == pytest.approx(totals["p4"]) == pytest.approx(10 / 3)


def test_margin_from_score_gaps():
    pairs = expand_listwise(Dataset.from_dict(SCORED), margin_scale=2.0)
    for row in pairs:
        index = SCORED["prompt"].index(row["prompt"])
        scores = dict(zip(SCORED["completions"][index], SCORED["scores"][index]))
        assert row["margin"] == pytest.approx(2.0 * (scores[row["chosen"]] - scores[row["rejected"]]))
        assert row["margin"] > 0


def test_ranking_lists_completion_indices_best_first():
    data = Dataset.from_dict({"prompt": ["q"], "completions": [["worst", "best", "mid"]], "ranking": [[1, 2, 0]]})
    pairs = expand_listwise(data)
    assert sorted(zip(pairs["chosen"], pairs["rejected"])) == [("best", "mid"), ("best", "worst"), ("mid", "worst")]
    assert pairs["weight"] == pytest.approx([1 / 3] * 3)


def test_conversational_rows_expand_too():
    turn = lambda text: [{"role": "assistant", "content": text}]  # noqa: E731
    data = Dataset.from_dict(
        {"prompt": [[{"role": "user", "content": "hi"}]], "completions": [[turn("a"), turn("b")]], "scores": [[1, 0]]}
    )
    (row,) = expand_listwise(data)
    assert row["chosen"] == turn("a") and row["rejected"] == turn("b") and row["prompt"][0]["content"] == "hi"


@pytest.mark.parametrize(
    "row,message",
    [
        ({"completions": [["a", "b", "c"]], "ranking": [[0, 0, 1]]}, "row 1: `ranking` must be a permutation"),
        ({"completions": [["a", "b"]], "ranking": [[0, 2]]}, "row 1: `ranking` must be a permutation"),
        ({"completions": [["a"]], "ranking": [[0]]}, "row 1: `completions` must be a list of at least 2"),
        ({"completions": [["a", "b"]], "scores": [[1.0]]}, "row 1: `scores` has 1 entries but there are 2"),
        ({"completions": [["a", "b"]], "scores": [[1.0, None]]}, "row 1: `scores` contains a missing value"),
    ],
)
def test_malformed_rows_name_the_row_index(row, message):
    key = "ranking" if "ranking" in row else "scores"
    good = {"completions": [["x", "y"]], key: [[0, 1] if key == "ranking" else [1.0, 0.0]]}
    data = Dataset.from_list([{k: v[0] for k, v in good.items()}, {k: v[0] for k, v in row.items()}])
    with pytest.raises(ValueError, match=message):
        expand_listwise(data)


def test_needs_exactly_one_of_ranking_and_scores_and_scores_for_margins():
    with pytest.raises(ValueError, match="exactly one of"):
        expand_listwise(Dataset.from_dict({"completions": [["a", "b"]]}))
    with pytest.raises(ValueError, match="needs a `scores` column"):
        expand_listwise(Dataset.from_dict({"completions": [["a", "b"]], "ranking": [[0, 1]]}), margin_scale=1.0)


def test_is_listwise():
    assert is_listwise(["prompt", "completions", "scores"])
    assert not is_listwise(["prompt", "chosen", "rejected"])
