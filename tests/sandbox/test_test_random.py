"""Class 1: the test's own `random` draws are a secret of the judge. Every pass of one evaluation draws the same
inputs, but no program can know them in advance: a program that answers the k-th draw of a guessed seed (a test
checking an inverse on random inputs, as HumanEval/38 and /50 do) scores 0."""

from __future__ import annotations

import random

from trl_ext.sandbox import Limits, run_tests

FAST = Limits(timeout_s=10.0)
TEST = """import random
def scramble(s):
    return s[::-1] + "!"
for _ in range(5):
    s = "".join(random.choice("abcdefgh") for _ in range(12))
    assert unscramble(scramble(s)) == s
"""
RIGHT = "def unscramble(t):\n    return t[:-1][::-1]\n"


def _guessing(seed: int) -> str:
    """A program that computes nothing: it replays the test's draws under ``random.seed(seed)``."""
    rng = random.Random(seed)
    draws = ["".join(rng.choice("abcdefgh") for _ in range(12)) for _ in range(5)]
    return (
        f"DRAWS = {draws!r}\nCALLS = []\ndef unscramble(t):\n    CALLS.append(t)\n    return DRAWS[len(CALLS) - 1]\n"
    )


def test_a_program_cannot_replay_the_tests_random_draws():
    for seed in (0, 1):  # the seed every evaluation used before, and another guess
        report = run_tests(_guessing(seed), {"kind": "assert", "code": TEST}, limits=FAST)
        assert report.passed == 0 and not report.infra_error, report


def test_the_right_program_still_passes_on_random_inputs():
    assert run_tests(RIGHT, {"kind": "assert", "code": TEST}, limits=FAST).all_passed
