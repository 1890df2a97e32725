"""scripts/agreement_math_verify.py: reading labelled pytest tables from test sources, one label per pair, and the
completion built from a prediction (on synthetic tables written here)."""

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "agreement_math_verify.py"
_spec = importlib.util.spec_from_file_location("agreement_math_verify", SCRIPT)
agreement = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = agreement  # its dataclasses look their module up
_spec.loader.exec_module(agreement)

SOURCE = """
import pytest

@pytest.mark.parametrize(
    "gold,pred,expected",
    [
        ("$3$", "$\\\\frac{6}{2}$", 1),
        ("$3$", "$4$", 0),
        ("$x$", f"{1 + 1}", 1),
        (f"{math.sqrt(4):.3f}", "$2$", 1),
        ("$3$", "$3$", 1, 7),
    ],
)
def test_one(gold, pred, expected):
    assert check(gold, pred, precision=4) == expected


@pytest.mark.parametrize(["gold", "pred", "flag", "result"], [("a", "b", True, 1), ("a", "b", False, 0)])
def test_two(gold, pred, flag, result):
    assert check(gold, pred, strict=flag) == result


@pytest.mark.parametrize("pred,expected", [("5", 5)])
def test_no_gold(pred, expected):
    pass
"""


def test_tables_are_read_with_their_options_and_bad_rows_reported():
    table = agreement.read_tables(SOURCE, "test_synthetic.py")
    assert [(case.gold, case.pred, case.expected) for case in table.cases] == [
        ("$3$", "$\\frac{6}{2}$", 1),
        ("$3$", "$4$", 0),
        ("2.000", "$2$", 1),
        ("a", "b", 1),
        ("a", "b", 0),
    ]
    assert table.cases[0].options == {"precision": 4}
    assert table.cases[3].options == {"flag": True}  # the row's value wins over the call's non-literal keyword
    assert table.cases[0].where.startswith("test_synthetic.py:7 (test_one)")
    assert table.cases[2].where.startswith("test_synthetic.py:10 (test_one)")  # an f-string of a math function
    assert len(table.unreadable) == 2
    assert "not a tuple of literals" in table.unreadable[0] and "test_synthetic.py:9" in table.unreadable[0]
    assert "another shape" in table.unreadable[1]


def test_a_pair_labelled_both_ways_is_left_out_and_repeats_count_once():
    cases = agreement.read_tables(SOURCE, "t.py").cases
    kept, conflicts = agreement.unique_cases(cases + cases[:1])
    assert [(case.gold, case.pred) for case in kept] == [("$3$", "$\\frac{6}{2}$"), ("$3$", "$4$"), ("2.000", "$2$")]
    assert [(first.expected, other.expected) for first, other in conflicts] == [(1, 0)]


@pytest.mark.parametrize(
    "pred, completion",
    [
        ("$\\frac13$", "$\\boxed{\\frac13}$"),  # one math span: the box inside it
        ("\\(x = 2\\)", "\\(\\boxed{x = 2}\\)"),
        ("28 percent", "\\boxed{28 percent}"),
        ("$28$ %", "\\boxed{$28$ %}"),  # a unit after the math is the answer's
        ("The answer is $\\boxed{5}$.", "The answer is $\\boxed{5}$."),  # a box: as it is
        ("Answer $ 9 $", "Answer $ 9 $"),  # a lead before the math: prose
        ("so the number is 10 which is 12", "so the number is 10 which is 12"),
    ],
)
def test_the_completion_of_a_prediction(pred, completion):
    assert agreement.completion_of(pred) == completion


def test_a_folder_without_tests_is_a_clear_error(tmp_path):
    with pytest.raises(SystemExit, match="no tests/ folder"):
        agreement.read_checkout(tmp_path)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text("def test_x():\n    pass\n")
    with pytest.raises(SystemExit, match="no labelled"):
        agreement.read_checkout(tmp_path)
