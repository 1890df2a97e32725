"""MathAccuracy against wrong answers that scored 1 until the root of each was fixed: hedges around an option
letter or an anchored answer, chained equations, math-verify's 6-decimal-place rounding of numbers, percent
scale, times read as ratios, thousands forms, empty normalised keys, unit words that change the value, named
solution sets with other names, repeated parts. Each class has right answers next to the wrong ones, so that a
fix that rejects everything fails too."""

import pytest

from trl_ext.rewards import MathAccuracy
from trl_ext.rewards.math import normalize_gold

# generous deadline: these tests check verdicts on a shared, loaded machine, not speed
REWARD = MathAccuracy(timeout_s=20.0, correct_value=1.0, wrong_value=-1.0)
ANCHORED = MathAccuracy(timeout_s=20.0, correct_value=1.0, wrong_value=-1.0, extraction="anchored")

# gold -> (answers scored 1, answers scored -1)
CLASSES = {
    "another option letter or a hedge after the chosen one": (
        "(B)",
        [r"\boxed{(B)}", r"\boxed{\text{(B) } 7}", r"\boxed{(B)\ \frac{3}{4}}"],
        [
            r"\boxed{(B)\,E}",
            r"\boxed{(B)/(A)}",
            r"\boxed{(B)\text{ or }A}",
            r"\boxed{\textbf{(B) or }C}",
            r"\boxed{(B) \lor C}",
            r"\boxed{(B)\text{ maybe }A}",
        ],
    ),  # fmt: skip
    "'or' in any text command splits the answer": (
        "y = 7",
        [r"\boxed{y = 7}"],
        [r"\boxed{y = 6\textit{ or }y = 7}", r"\boxed{y = 6\mathbf{ OR }y = 7}"],
    ),
    "a chain of values that differ": (
        "12",
        [r"\boxed{12}", r"\boxed{n = 3 \cdot 4 = 12}"],
        [r"\boxed{n = 11 = 12}", r"\boxed{5 = n = 12}", r"\boxed{12 \approx 13}", r"\boxed{2 x + 1 = 12}"],
    ),
    "tiny numbers are compared exactly, not to 6 decimal places": (
        r"4 \times 10^{-9}",
        [r"\boxed{0.000000004}", r"\boxed{\frac{1}{250000000}}", r"\boxed{4 \cdot 10^{-9}}"],
        [r"\boxed{5 \times 10^{-9}}", r"\boxed{0.000000001}", r"\boxed{4 \times 10^{-10}}"],
    ),
    "exact values are exact": (
        r"\frac{\sqrt{5}}{10^{12}}",
        [r"\boxed{\sqrt{5} \cdot 10^{-12}}"],
        [r"\boxed{\frac{\sqrt{6}}{10^{12}}}", r"\boxed{\frac{\sqrt{5}}{10^{12}} + 10^{-15}}"],
    ),
    "a short decimal gold is its printed value": (
        "0.00002",
        [r"\boxed{2 \times 10^{-5}}", r"\boxed{\frac{1}{50000}}"],
        [r"\boxed{\frac{1}{49999}}", r"\boxed{0.000021}"],
    ),
    "a long decimal gold: rounding of the answer at its precision": (
        "2.645751",
        [r"\boxed{\sqrt{7}}", r"\boxed{2.6457513}"],
        [r"\boxed{2.645752}", r"\boxed{2.64575}", r"\boxed{\sqrt{7.000001}}"],
    ),
    "an exact gold and a decimal answer: 6 decimal places and 6 digits": (
        r"\frac{2}{7}",
        [r"\boxed{0.285714}", r"\boxed{0.2857143}"],
        [r"\boxed{0.2857}", r"\boxed{0.285715}"],
    ),
    "a percent gold: the answer's number, with or without its sign": (
        r"35\%",
        [r"\boxed{35}", r"\boxed{35\%}", r"\boxed{35 \text{ percent}}"],
        [r"\boxed{3500\%}", r"\boxed{0.35}", r"\boxed{0.35\%}"],
    ),
    "a percent answer to a plain gold is a hundredth": (
        r"\frac{3}{4}",
        [r"\boxed{75\%}", r"\boxed{0.75}"],
        [r"\boxed{0.75\%}"],
    ),
    "a time gold is never a ratio": (
        "4:20",
        [r"\boxed{4:20}", r"\boxed{4:20:00}"],
        [r"\boxed{\frac{1}{5}}", r"\boxed{8:40}", r"\boxed{2:10}"],
    ),
    "a time answer is never a ratio for a number gold": (
        r"\frac{1}{3}",
        [r"\boxed{\frac{1}{3}}"],
        [r"\boxed{5:15}", r"\boxed{2:06}"],
    ),
    "spacing commands around a thousands comma join the groups": (
        r"7\!,\!654\!,\!321",
        [r"\boxed{7654321}", r"\boxed{7,654,321}"],
        [r"\boxed{7, 654, 321}", r"\boxed{7654}"],
    ),
    "digits apart are not a number": (
        "2468",
        [r"\boxed{2468}", r"\boxed{2\,468}"],
        [r"\boxed{2\,4\,6\,8}", r"\boxed{24\;68}"],
    ),
    "an answer of spacing commands only": (
        r"\{4, 9\}\quad",
        [r"\boxed{\{4, 9\}}", r"\boxed{9, 4}"],
        [r"\boxed{\left, \right}", r"\boxed{\Big}\boxed{\big}"],
    ),
    "a word after the number that changes its value": (
        "6",
        [r"\boxed{6}", r"\boxed{6\text{ marbles}}", r"\boxed{6 \text{ km per hour}}"],
        [
            r"\boxed{6\text{ dozen}}",
            r"\boxed{6 \text{ squared}}",
            r"\boxed{6\,\mathrm{K}}",
            r"\boxed{6 lakh}",
            r"\boxed{6\text{ gross}}",
            r"\boxed{6 \text{ halves}}",
            r"\boxed{6qrst}",
            r"\boxed{6\,\text{rad}}",
        ],
    ),  # fmt: skip
    "money in another unit": (
        r"\$12",
        [r"\boxed{12}", r"\boxed{\$ 12.00}", r"\boxed{12 \text{ dollars}}"],
        [r"\boxed{12 \text{ cents}}", r"\boxed{12 \text{ euros}}"],
    ),
    "an angle in another unit": (
        r"45^\circ",
        [r"\boxed{45}", r"\boxed{45^\circ}"],
        [r"\boxed{45 \text{ radians}}", r"\boxed{45\,\mathrm{rad}}"],
    ),
    "named solutions with other names": (
        "m=1,n=4;m=4,n=1",
        [r"\boxed{(1,4),(4,1)}", r"\boxed{m=4,n=1;m=1,n=4}"],
        [r"\boxed{u=1,v=4;u=4,v=1}", r"\boxed{m=1,n=4;m=4,n=1;m=1,n=4}"],
    ),
    "relations in other variables, or that overlap, are no union": (
        r"(-\infty, 1) \cup (4, \infty)",
        [r"\boxed{x < 1 \text{ or } x > 4}"],
        [r"\boxed{x < 1, y > 4}", r"\boxed{x < 5, x > 0}"],
    ),
    "a part repeated in a several-part answer is another part": (
        "2, 5",
        [r"\boxed{5, 2}", r"\boxed{2}\boxed{5}"],
        [r"\boxed{2, 5, 5}", r"\boxed{2}\boxed{5}\boxed{2}"],
    ),
    "a digit with a subscript is a numeral in a base": (
        "10",
        [r"\boxed{10}"],
        [r"\boxed{10_{3}}", r"\boxed{10_2}"],
    ),
    "degree arithmetic is in degrees for an angle gold": (
        r"120^\circ",
        [r"\boxed{120}", r"\boxed{2 \cdot 60^\circ}", r"\boxed{180^\circ - 60^\circ}"],
        [r"\boxed{2 \cdot 50^\circ}", r"\boxed{\frac{2\pi}{3}}", r"\boxed{120 \text{ rad}}"],
    ),
    "an angle gold written as arithmetic": (
        r"\frac{270^\circ}{3}",
        [r"\boxed{90}", r"\boxed{90^\circ}"],
        [r"\boxed{\frac{\pi}{2}}", r"\boxed{80}"],
    ),
    "a temperature is no angle": (
        r"25^\circ\text{C}",
        [r"\boxed{25}", r"\boxed{25^\circ\text{C}}"],
        [r"\boxed{\frac{5\pi}{36}}", r"\boxed{25^\circ\text{F}}"],
    ),
    "pi over 180 is not a degree written out": (
        r"\frac{\pi}{180}",
        [r"\boxed{\frac{\pi}{180}}"],
        [r"\boxed{1}"],
    ),
    "a number before a bracket is a product, not a mixed number": (
        r"3\left(\frac{1}{3}\right)",
        [r"\boxed{1}"],
        [r"\boxed{\frac{10}{3}}"],
    ),
    "a difference too small to measure is no proof of equality": (
        "1",
        [r"\boxed{\cos(0)}", r"\boxed{\sqrt{1}}"],
        [r"\boxed{\cos(10^{-100})}", r"\boxed{\sqrt{1+10^{-150}}}"],
    ),
    "an exponent's digit before a bracket stays an exponent": (
        r"\tan^2(y) + 1",
        [r"\boxed{\sec^2(y)}", r"\boxed{1 + \tan^2(y)}"],
        [r"\boxed{\tan^2(y)}"],
    ),
}


@pytest.mark.parametrize("gold, right, wrong", CLASSES.values(), ids=CLASSES.keys())
def test_wrong_answers_score_wrong_and_right_ones_right(gold, right, wrong):
    completions = [f"So the answer is ${answer}$." for answer in right + wrong]
    assert REWARD(completions, solution=[gold] * len(completions)) == [1.0] * len(right) + [-1.0] * len(wrong)


# (gold, anchored completions scored 1, anchored completions scored -1)
ANCHORED_CLASSES = {
    "a hedge in the anchored sentence": (
        "8",
        ["The final answer is 8.", "The final answer is $8$. I hope it is correct.", "The answer is 8 apples."],
        [
            "The final answer is 8 or 9.",
            "The final answer is either 8 or 9.",
            "The final answer is not 8.",
            "The final answer is 8, though it might be 9.",
            "The final answer is $8$ (perhaps $9$).",
            "The final answer is between 8 and 9.",
            "The final answer is 9 = 8.",
            "The answer is +8 or -8.",
        ],
    ),  # fmt: skip
}


@pytest.mark.parametrize("gold, right, wrong", ANCHORED_CLASSES.values(), ids=ANCHORED_CLASSES.keys())
def test_anchored_answers_are_whole_sentences(gold, right, wrong):
    scores = ANCHORED(right + wrong, solution=[gold] * (len(right) + len(wrong)))
    assert scores == [1.0] * len(right) + [-1.0] * len(wrong)


@pytest.mark.parametrize(
    "gold",
    [r"\begin{bmatrix} 1 & 2", "3 -", r"2 \cdot", r"\left[ 0, 1", r"\\", "Left as an exercise to the reader."],
)
def test_golds_cut_short_score_none(gold):
    with pytest.warns(UserWarning, match="not a parseable answer"):
        assert REWARD([rf"\boxed{{{gold}}}", r"\boxed{1}"], solution=[gold, gold]) == [None, None]


def test_a_float_gold_is_read_as_its_decimal():
    assert normalize_gold(3e-06) == (("0.000003",), False)
    assert REWARD([r"\boxed{0.000003}", r"\boxed{e - 6}"], solution=[3e-06, 3e-06]) == [1.0, -1.0]


def test_numpy_golds_and_flags_are_read_as_their_python_values():
    import numpy as np

    golds = [np.float64(0.5), np.float32(0.25), np.int64(7), np.int32(3)]
    completions = [r"\boxed{0.5}", r"\boxed{0.25}", r"\boxed{7}", r"\boxed{4}"]
    assert REWARD(completions, solution=golds) == [1.0, 1.0, 1.0, -1.0]
    ordered = [np.bool_(True), np.bool_(False)]
    scores = REWARD([r"\boxed{2, 1}"] * 2, solution=["1, 2"] * 2, ordered_lists=ordered)
    assert scores == [-1.0, 1.0]
