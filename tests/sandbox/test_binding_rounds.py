"""Class 1 through the round structure: every sandbox run of an assert test runs the calls made so far again, later
calls included, in a fresh interpreter. A program that carries data from one run to the next (the host page cache,
timing) could answer an earlier call with a later call's argument; the first answer to each position is binding,
so a run that answers an already answered call differently makes the test unsupported, never a pass."""

from __future__ import annotations

import copy
import random

from trl_ext.sandbox import Limits, get_backend, run_tests
from trl_ext.sandbox.records import RunHistory

FAST = Limits(timeout_s=10.0)


def _sees_previous_run():
    """The default backend, with every run handed the calls the previous run showed the program as ``LATER`` (what a
    program reading a cross-run channel such as the page cache would learn), on the real backend underneath."""
    backend, previous = copy.copy(get_backend()), [[]]  # a copy: the shared default backend stays as it is
    launch = backend.launch

    def launch_knowing_the_previous_run(payload, stdin, limits, progress=None):
        code = f"LATER = {previous[0]!r}\n" + payload["code"]
        result = launch({**payload, "code": code}, stdin, limits, progress=progress)
        lines = [line for line in result.stdout.splitlines() if line.startswith(payload["marker"])]
        shown = len(lines) - ("describe" in payload) + (not lines or '"halt": true' not in lines[-1])
        previous[0] = [call[1] for call in payload.get("calls", [])[: max(shown, 0)]]
        return result

    backend.launch = launch_knowing_the_previous_run
    return backend


# encode() answers with the argument of the previous run's last call when there was one (a later decode's)
CHEAT = """
def count_up(n):
    yield from range(n)
def encode(s):
    last = LATER[-1] if LATER else None
    return last[0] if last and last[0] != s else s
def decode(s):
    return "hello"
"""
TEST = (
    "assert list(count_up(40)) == list(range(40))\n"
    "assert encode('hello') == 'khoor'\n"
    "assert decode('khoor') == 'hello'\n"
)
RIGHT = """
def count_up(n):
    yield from range(n)
def encode(s):
    return "".join(chr((ord(c) - 97 + 3) % 26 + 97) for c in s)
def decode(s):
    return "".join(chr((ord(c) - 97 - 3) % 26 + 97) for c in s)
"""


def test_a_generator_ends_the_run_before_the_calls_guessed_after_it():
    # the run stops after count_up() and after each batch of items until the generator ended: encode and decode
    # reach the program only once they are at their places, so nothing carried over helps the cheat
    report = run_tests(CHEAT, {"kind": "assert", "code": TEST}, limits=FAST, backend=_sees_previous_run())
    assert report.passed == 0 and not report.infra_error and "AssertionError" in report.detail


# the test changes the box before encode(): the first run (which knew no result) sent encode without the change and
# showed decode('khoor') after it; the next run sends encode with the change, i.e. a call answered for the first time
# after the program saw a later one
MUTATES = "a = box()\na.append(1)\nassert encode('hello') == 'khoor'\nassert decode('khoor') == 'hello'\n"


def test_a_call_first_answered_after_a_later_call_was_shown_is_refused():
    report = run_tests(
        "def box():\n    return []\n" + CHEAT,
        {"kind": "assert", "code": MUTATES},
        limits=FAST,
        backend=_sees_previous_run(),
    )
    assert report.passed == 0 and not report.infra_error
    assert "unsupported_test" in report.statuses and "calls not made yet" in report.detail


def test_a_program_giving_the_same_answers_in_every_run_still_passes():
    spec = {
        "kind": "assert",
        "code": "x = encode('hello')\nassert decode(x) == 'hello'\nassert encode('ab') == 'de'\n",
    }
    report = run_tests(RIGHT, spec, limits=FAST, backend=_sees_previous_run())
    assert report.all_passed, report
    assert len(report.statuses) > 1  # decode(x) waited for x: the next run answered encode('hello') again
    gen = {"kind": "assert", "code": "assert list(count_up(40)) == list(range(40))\n"}
    assert run_tests(RIGHT, gen, limits=FAST, backend=_sees_previous_run()).all_passed


def _history(calls, results) -> RunHistory:
    history = RunHistory()
    assert not history.conflicts(calls, results)
    return history


def test_a_call_answered_before_must_get_the_same_record_again():
    calls = [["f", [1], {}, []], ["g", [2], {}, []]]
    first = [{"ok": True, "value": 1, "dt": 0.1}, {"ok": False, "missing": True}]
    again = [{"ok": True, "value": 1, "dt": 0.5}, {"ok": True, "value": 3}]
    assert not _history(calls, first).conflicts(calls, again)  # only the duration differs; g is new
    assert _history(calls, first).conflicts(calls, [{"ok": True, "value": 2}, {"ok": True, "value": 3}])
    moved = [["", [0], {}, []], *calls]  # f answered again further down, an iterator's step first
    missing = {"ok": False, "missing": True}  # the step unanswered: f is bound to its first answer
    assert not _history(calls, first).conflicts(moved, [missing, *again])
    assert _history(calls, first).conflicts(moved, [missing, {"ok": True, "value": 2}, {"ok": True, "value": 3}])


def test_a_first_answer_after_a_later_call_was_shown_is_refused():
    shown = [["f", [1], {}, []], ["g", [2], {}, []]]
    history = _history(shown, [{"ok": True, "value": 1}, {"ok": True, "value": 2}])
    # the next run answers a new call (an iterator's step) before g, which it had already been shown
    assert history.conflicts([shown[0], ["", [0], {}, []], shown[1]], [{"ok": True, "value": 1}] * 3)
    history = _history(shown, [{"ok": True, "value": 1}, {"ok": True, "value": 2}])
    assert not history.conflicts([*shown, ["h", [3], {}, []]], [{"ok": True, "value": v} for v in (1, 2, 3)])


def test_an_iterator_step_carrying_the_tests_changes_is_shown_data():
    """Red team round 14 (R14J-5): a plain ``next()`` step that carries the test's change to a numbered object shows
    the program the test's data, as an argument or a sent value does: a call first answered before it in a later
    run is refused (it was accepted: the step was never keyed)."""
    ok = [{"ok": True, "v": value} for value in (None, [], 0, 7, 0)]
    for showing in (
        ["", [1], {"d": []}, [[0, {"l": [7]}]]],
        ["p", [7], {"d": []}, []],
        ["", [1, 2, 7], {"d": []}, []],
    ):
        base = [["gen", [], {"d": []}, []], ["f", [], {"d": []}, []], ["u", [{"a": 0}], {"d": []}, []]]
        history = RunHistory()
        assert not history.conflicts([*base, showing], [*ok[:3], ok[4]])
        assert history.conflicts([*base, ["h", [], {"d": []}, []], showing], ok), showing
    plain = ["", [1], {"d": []}, []]  # a step that carries nothing of the test shows nothing
    history = RunHistory()
    assert not history.conflicts([*base, plain], [*ok[:3], ok[4]])
    assert not history.conflicts([*base, ["h", [], {"d": []}, []], plain], ok)


def test_the_history_is_total_over_runs_of_any_length():
    """A run the harness ended early (a wrong guess: "halt") has fewer results than calls; a later run that repeats
    its calls must not read past them (red team round 12, R12J-6: ``zip`` of two program generators raised
    IndexError out of the reward). Generated histories: runs of random lengths, halts, missing records."""
    rng = random.Random(12)
    pool = [["f", [k], {}, []] for k in range(4)] + [["", [k], {}, []] for k in range(3)]
    for _ in range(3000):
        history = RunHistory()
        for _ in range(rng.randint(1, 5)):
            calls = [rng.choice(pool) for _ in range(rng.randint(0, 8))]
            results = [
                rng.choice([{"ok": True, "value": rng.randint(0, 2)}, {"ok": False, "missing": True}])
                for _ in range(rng.randint(0, len(calls)))
            ]
            if results and rng.random() < 0.5:
                results[-1] = {**results[-1], "halt": True}
            assert history.conflicts(calls, results) in (True, False)


def test_two_program_iterators_taken_in_turn_score_as_in_python():
    program = "def nat():\n    n = 0\n    while True:\n        yield n\n        n += 1\ndef fin(k):\n    yield from range(k)\n"
    for test in (
        "assert list(zip(fin(3), nat())) == [(0, 0), (1, 1), (2, 2)]",
        "import itertools\nassert list(itertools.chain(fin(2), fin(3))) == [0, 1, 0, 1, 2]",
        "assert dict(zip(fin(3), nat())) == {0: 0, 1: 1, 2: 2}",
    ):
        assert run_tests(program, {"kind": "assert", "code": test}, limits=FAST).all_passed, test
        wrong = program.replace("range(k)", "range(1, k + 1)")
        assert run_tests(wrong, {"kind": "assert", "code": test}, limits=FAST).passed == 0, test
