"""The math reward's fast paths give the verdict of the full path: a plain number skips ``split_parts``' readings in
the calling process, and the workers decide a plain integer, fraction or decimal against another from the printed
values (``numeric_verdict``) without math-verify's parse. Each is run on and off over the labelled table and over
plain numbers and their near misses (rounding, signs, units, percent signs, thousands separators, E notation)."""

import json
from pathlib import Path

import pytest

import trl_ext.rewards._math_extract as extract
from tests.rewards.math_worker_loader import load_worker
from trl_ext.rewards._text import completion_text
from trl_ext.rewards.math import MathAccuracy, _unescaped, normalize_gold

TABLE = Path(__file__).parents[1] / "data" / "math_labelled.jsonl"
NUMBERS = [
    "0", "073", "-12", "+5", "- 5", "1234567", "0.5", ".5", "-.5", "+0.5", "0.50", "2.50", "3.0", "0.1", "0.10",
    "0.333333", "0.33333", "0.3333333", "0.333334", "-0.333333", "0.666667", "0.6666667", "0.0000010",
    "0.00000099", "0.002314814814815", "1234567.00001", "0.4999999", "0.500000000", "\\frac{1}{2}", "\\frac{1}{3}",
    "\\frac{-1}{3}", "\\dfrac{2}{3}", "\\frac{1}{432}", "\\frac{0}{5}", "2 / 6", "\\frac{1}{1000000}",
]  # fmt: skip
NEAR_MISSES = [
    "0.5\\%", "50\\%", "12.5\\%", "0.5 \\text{ cm}", "0.5\\text{ m}", "\\$0.50", "0.5^\\circ", "1,000", "1\\,000",
    "1 000", "1{,}000.5", "1e-3", "2.5e6", "1.5 \\times 10^{-3}", "3.14\\ldots", "3.14...", "0.\\overline{3}",
    "x = 0.5", "0.5 = x", "\\frac{1}{2} \\approx 0.5", "0.333 \\approx \\frac{1}{3}", "(0.5)", "0.5, 0.5",
    "\\frac{1}{2}, 0.5", "0.5 \\pm 0.1", "1 1/2", "5.", "0.5x", "\\pi", "\\sqrt{0.25}", "0,5", "$0.5$", "\\(0.5\\)",
]  # fmt: skip


def _grader(fast: bool):
    """The math worker's Grader with its fast paths on or off (a Grader of its own: parsed golds are cached per
    Grader)."""
    _, grader = load_worker()
    grader.fast_paths = fast
    return grader


@pytest.fixture(scope="module")
def graders():
    fast, full = _grader(True), _grader(False)
    for grader in (fast, full):  # both parse: a pair that needs math-verify, and one that the fast path decides
        assert grader.grade(_task("2", ("\\sqrt{4}",))) == "correct"
        assert grader.grade(_task("\\frac{1}{3}", ("0.333333",))) == "correct"
    return fast, full


def _verdicts(graders, tasks: list[dict]) -> tuple[int, list[tuple]]:
    """How many tasks took the workers' fast path, and (task, fast verdict, full verdict) of every one of them
    whose two verdicts differ (a task that never takes it runs the full path's code in both graders)."""
    fast, full = graders
    taken, differ = 0, []
    for task in tasks:
        decided = []
        fast._plain_values = _recording(type(fast)._plain_values, decided)
        verdict = fast.grade(dict(task))
        if any(values is not None for values in decided):
            taken += 1
            if full.grade(dict(task)) != verdict:
                differ.append((task, verdict, full.grade(dict(task))))
    return taken, differ


def _recording(plain_values, seen: list):
    def recorded(gold, answer):
        seen.append(plain_values(gold, answer))
        return seen[-1]

    return recorded


def _task(gold: str, answer: tuple, timeout: int = 10) -> dict | None:
    normalized = normalize_gold(gold)
    if normalized is None:
        return None
    parts, ordered = normalized
    return {"gold": list(parts), "ordered": ordered, "answer": list(answer), "timeout": timeout}


def test_plain_numbers_split_alike_with_and_without_the_fast_path(monkeypatch):
    rows = [json.loads(line) for line in TABLE.read_text().splitlines() if line.strip()]
    contents = {row["gold"] for row in rows} | set(NUMBERS) | set(NEAR_MISSES)
    contents |= {box for row in rows for box in extract._boxes(str(row["completion"]))}
    contents |= {pad + number + end for number in NUMBERS for pad in ("", " ", "\t") for end in ("", " ", "\n")}
    taken = [content for content in contents if content.isascii() and extract._PLAIN_NUMBER.fullmatch(content)]
    assert len(taken) > 300  # the fast path is exercised, not only the contents it refuses
    for gold in (False, True):
        fast = {content: extract.split_parts(content, gold) for content in contents}
        monkeypatch.setattr(extract, "FAST_PATHS", False)
        full = {content: extract.split_parts(content, gold) for content in contents}
        monkeypatch.setattr(extract, "FAST_PATHS", True)
        assert [content for content in contents if fast[content] != full[content]] == []
    contents |= {"1" * extract.MAX_ANSWER_CHARS, "1" * (extract.MAX_ANSWER_CHARS + 1)}  # too long: not an answer
    for ordered in (False, True):  # a whole gold that is a plain number: its parts without the full reading
        fast = {content: extract.gold_parts(content, ordered) for content in contents}
        monkeypatch.setattr(extract, "FAST_PATHS", False)
        full = {content: extract.gold_parts(content, ordered) for content in contents}
        monkeypatch.setattr(extract, "FAST_PATHS", True)
        assert [content for content in contents if fast[content] != full[content]] == []


def test_plain_number_pairs_grade_alike_with_and_without_the_fast_path(graders):
    tasks = [_task(gold, (answer,)) for gold in NUMBERS for answer in NUMBERS + NEAR_MISSES]
    tasks += [_task(gold, (answer,)) for gold in NEAR_MISSES for answer in NUMBERS]
    tasks += [_task("\\frac{1}{2}, \\frac{1}{3}", ("0.333333", "0.5")), _task("0.5, 0.25", ("\\frac{1}{4}", "0.50"))]
    tasks += [_task("\\frac{1}{2}", ("0.5000000", "\\frac{1}{2}")), _task("2, 3", ("3.0", "2.0"))]
    tasks = [task for task in tasks if task is not None]
    fast, _ = graders
    verdicts = [fast.grade(dict(task)) for task in tasks]
    assert verdicts.count("correct") > 100 and verdicts.count("wrong") > 1000  # both verdicts are compared
    taken, differ = _verdicts(graders, tasks)
    assert taken > 1000 and differ == []


def test_the_labelled_table_grades_alike_with_and_without_the_fast_path(graders):
    rows = [json.loads(line) for line in TABLE.read_text().splitlines() if line.strip()]
    tasks = []
    for extraction in ("boxed", "anchored"):
        reward = MathAccuracy(extraction=extraction)
        for i, row in enumerate(rows):
            if row.get("extraction", "boxed") != extraction:
                continue
            answer = reward.extract(_unescaped(completion_text(row["completion"], i)))
            task = _task(row["gold"], answer) if answer is not None else None
            tasks += [task] if task is not None else []
    assert len(tasks) > 1000
    taken, differ = _verdicts(graders, tasks)
    assert taken > 30 and differ == []
