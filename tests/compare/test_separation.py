"""The separation rule: 4 of 5 seeds better AND means further apart than the larger std."""

from __future__ import annotations

import pytest

from trl_ext.compare.separation import separate


def test_consistent_large_difference_separates():
    result = separate([0.30, 0.25, 0.20, 0.28, 0.10], [-0.10, -0.20, 0.0, -0.30, 0.12])
    assert (result.wins, result.losses, result.verdict) == (4, 1, "separates")


def test_wins_without_distance_do_not_separate():
    # better in every seed, but by less than the spread over seeds
    result = separate([0.51, 0.31, 0.11, 0.71, 0.91], [0.50, 0.30, 0.10, 0.70, 0.90])
    assert result.wins == 5 and result.verdict == "does not separate"


def test_distance_without_enough_wins_does_not_separate():
    # the mean is far ahead because of one seed; only 3 of 5 seeds are better
    result = separate([5.0, 5.0, 5.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0, 1.0])
    assert result.wins == 3 and result.verdict == "does not separate"


def test_lower_is_better_and_the_reverse_direction():
    assert (
        separate([6.0, 6.1, 5.9, 6.0, 6.2], [8.0, 8.1, 7.9, 8.2, 8.0], higher_is_better=False).verdict == "separates"
    )
    reverse = separate([0.1, 0.0, 0.1, 0.0, 0.1], [0.5, 0.6, 0.5, 0.6, 0.5])
    assert (reverse.losses, reverse.verdict) == (5, "separates in reverse")


def test_ties_count_for_neither_side():
    result = separate([1.0, 1.0, 2.0], [1.0, 1.0, 0.0])
    assert (result.wins, result.losses) == (1, 0) and result.verdict == "does not separate"


@pytest.mark.parametrize(("a", "b", "message"), [([1.0, 2.0], [1.0], "same seeds"), ([1.0], [2.0], "at least 2"),
                                                 ([1.0, float("nan")], [1.0, 2.0], "NaN")])  # fmt: skip
def test_bad_input_says_what_is_wrong(a, b, message):
    with pytest.raises(ValueError, match=message):
        separate(a, b)
