"""trl_ext.rewards.CodeTests / AsyncCodeTests and the dataset adapters, on the bubblewrap sandbox."""

import asyncio
import json
import pickle

import pytest
from trl.trainer.utils import get_callable_name, is_async_callable

from trl_ext.rewards import AsyncCodeTests, CodeTests, code_tests, code_tests_async, magistral_code_reward
from trl_ext.rewards.code_adapters import (
    asserts_to_call,
    from_apps,
    from_humaneval,
    from_livecodebench,
    from_mbpp,
)

STDIO = json.dumps(
    {"kind": "stdio", "cases": [{"input": "2 3\n", "output": "5"}, {"input": "10 -4\n", "output": "6"}]}
)
GOOD = "Here:\n```python\na, b = map(int, input().split())\nprint(a + b)\n```"
WRONG = "```python\na, b = map(int, input().split())\nprint(a - b)\n```"
HALF = "```python\na, b = map(int, input().split())\nprint(5)\n```"
FAST = CodeTests(timeout_s=3.0)


def fence(code):
    return f"```python\n{code}\n```"


def test_binary_scores_plain_and_conversational():
    completions = [GOOD, [{"role": "assistant", "content": GOOD}], WRONG, "no code at all", "```python\n```"]
    assert FAST(completions, tests=[STDIO] * 5) == [1.0, 1.0, 0.0, 0.0, 0.0]


def test_last_code_block_of_the_answer_region_is_the_program():
    draft_then_final = f"<think>{GOOD}</think> final:\n{WRONG}"
    final_after_draft = f"{WRONG}\nactually:\n{GOOD}"
    assert FAST([draft_then_final, final_after_draft, f"<think>{GOOD}"], tests=[STDIO] * 3) == [0.0, 1.0, 0.0]


def test_fraction_mode_and_custom_values():
    fraction = CodeTests(mode="fraction", timeout_s=3.0)
    assert fraction([HALF, GOOD], tests=[STDIO] * 2) == [0.5, 1.0]
    signed = CodeTests(correct_value=1.0, wrong_value=-1.0, no_code_value=-2.0, timeout_s=3.0)
    assert signed([GOOD, WRONG, "none"], tests=[STDIO] * 3) == [1.0, -1.0, -2.0]


def test_program_faults_score_wrong():
    crash, loop = fence("raise SystemExit(1)"), fence("while True: pass")
    reward = CodeTests(timeout_s=1.0)
    assert reward([crash, loop], tests=[STDIO] * 2) == [0.0, 0.0]


def test_infra_faults_score_none(monkeypatch):
    from trl_ext.sandbox import _process

    monkeypatch.setattr(_process, "classify", lambda got, rc: "infra_error")
    monkeypatch.setattr("trl_ext.sandbox.base.classify", lambda got, rc: "infra_error")
    assert FAST([GOOD], tests=[STDIO]) == [None]


def test_call_and_assert_kinds():
    call = {
        "kind": "call",
        "fn_name": "add",
        "cases": [{"args": [1, 2], "expected": 3}, {"args": [[1], [2]], "expected": [1, 2]}],
    }
    asserts = {"kind": "assert", "code": "assert add(1, 2) == 3\nassert add('a', 'b') == 'ab'"}
    program = fence("def add(a, b):\n    return a + b")
    assert FAST([program, program, fence("def add(a, b):\n    return 3")], tests=[call, asserts, asserts]) == [
        1.0,
        1.0,
        0.0,
    ]


def test_tests_column_errors_name_the_row():
    with pytest.raises(ValueError, match=r"code_tests, row 1: .*kind"):
        FAST([GOOD, GOOD], tests=[STDIO, {"kind": "unit"}])
    with pytest.raises(ValueError, match="`tests`"):
        FAST([GOOD], solution=["x"])


def test_async_variant_is_bounded_and_detected_by_trl():
    assert is_async_callable(code_tests_async) and not is_async_callable(code_tests)
    reward = AsyncCodeTests(workers=2, timeout_s=3.0)
    scores = asyncio.run(reward([GOOD, WRONG, GOOD, "none"], tests=[STDIO] * 4, prompts=["p"] * 4))
    assert scores == [1.0, 0.0, 1.0, 0.0]
    assert reward.executor()._max_workers == 2


def test_picklable_and_named():
    assert get_callable_name(code_tests) == "code_tests"
    assert get_callable_name(code_tests_async) == "code_tests"
    clone = pickle.loads(pickle.dumps(FAST))
    assert clone([GOOD], tests=[STDIO]) == [1.0]


def test_magistral_code_reward():
    good = f"<think>plan</think>\n{GOOD}"
    assert magistral_code_reward([good, GOOD, f"<think>plan</think>\n{WRONG}"], tests=[STDIO] * 3) == pytest.approx(
        [1.0, 0.0, 0.1]
    )


def test_rlimit_backend_is_explicit_opt_in():
    with pytest.raises(ValueError, match="explicit"):
        CodeTests(backend="none")
    assert CodeTests(backend="rlimit", timeout_s=3.0)([GOOD], tests=[STDIO]) == [1.0]


def test_adapters():
    apps = from_apps({"input_output": json.dumps({"inputs": ["1 2\n"], "outputs": ["3\n"]})})
    assert apps == {"kind": "stdio", "cases": [{"input": "1 2\n", "output": "3\n"}]}
    apps_call = from_apps({"input_output": {"fn_name": "f", "inputs": [[1, 2]], "outputs": [[3]]}})
    assert apps_call["cases"] == [{"args": [1, 2], "expected": 3}]
    lcb = from_livecodebench(
        {
            "public_test_cases": json.dumps([{"input": "[1, 2]\n3", "output": "[1, 2, 3]", "testtype": "functional"}]),
            "metadata": json.dumps({"func_name": "push"}),
        }
    )
    assert lcb == {"kind": "call", "fn_name": "push", "cases": [{"args": [[1, 2], 3], "expected": [1, 2, 3]}]}
    program = fence("class Solution:\n    def push(self, xs, x):\n        return xs + [x]")
    assert FAST([program], tests=[lcb]) == [1.0]


def test_simple_asserts_can_become_call_specs():
    mbpp = {"test_list": ["assert f(1, (2, 3)) == [6]", "assert 0 == f(0, [])"], "test_imports": []}
    assert from_mbpp(mbpp) == {"kind": "assert", "code": "assert f(1, (2, 3)) == [6]\nassert 0 == f(0, [])"}
    assert from_mbpp(mbpp, prefer_call=True) == {
        "kind": "call",
        "fn_name": "f",
        "cases": [{"args": [1, [2, 3]], "expected": [6]}, {"args": [0, []], "expected": 0}],
    }
    with_setup = from_mbpp({"test_list": ["assert f(1) == 2"], "test_imports": ["import math"]}, prefer_call=True)
    assert with_setup == {"kind": "assert", "code": "import math\nassert f(1) == 2"}
    humaneval = {
        "test": "METADATA = {}\n\ndef check(candidate):\n    assert candidate([1, 2]) == 3\n    assert candidate([]) == 0\n",
        "entry_point": "total",
    }
    assert from_humaneval(humaneval, prefer_call=True) == {
        "kind": "call",
        "fn_name": "total",
        "cases": [{"args": [[1, 2]], "expected": 3}, {"args": [[]], "expected": 0}],
    }
    loop = {
        "test": "def check(candidate):\n    for x in range(3):\n        assert candidate(x) == x\n",
        "entry_point": "f",
    }
    assert from_humaneval(loop, prefer_call=True)["kind"] == "assert"
    assert from_humaneval(humaneval) == {"kind": "assert", "code": humaneval["test"], "entry_point": "total"}
    for code in ["assert f(1) == 2\nassert g(1) == 2", "assert set(f(1)) == {2}", "assert f(1) < 2", "x = 1"]:
        assert asserts_to_call(code) is None, code
    rigged = fence("class T:\n    def __eq__(self, o): return True\ndef total(xs): return T()")
    honest = fence("def total(xs): return sum(xs)")
    for spec in (from_humaneval(humaneval), from_humaneval(humaneval, prefer_call=True)):
        assert FAST([rigged, honest], tests=[spec] * 2) == [0.0, 1.0]


HUMANEVAL_ROW = {
    "prompt": (
        "from typing import List\n\n\ndef shift(s: str) -> str:\n    return ''.join(chr(ord(c) + 1) for c in s)\n\n\n"
        'def unshift(s: str) -> str:\n    """Inverse of shift."""\n'
    ),
    "test": (
        "import random\n\ndef check(candidate):\n    for _ in range(20):\n"
        "        word = ''.join(random.choice('abcdef') for _ in range(random.randint(1, 9)))\n"
        "        assert candidate(shift(word)) == word\n"
    ),
    "entry_point": "unshift",
}


def test_native_completions_continue_the_prefix():
    spec = from_humaneval(HUMANEVAL_ROW)
    assert spec["prefix"] == HUMANEVAL_ROW["prompt"]
    body = "    return ''.join(chr(ord(c) - 1) for c in s)\n"
    wrong_body = "    return s\n"
    fenced_def = fence("def unshift(s: List[str]) -> str:\n    return ''.join(chr(ord(c) - 1) for c in s)")
    fenced_body = fence(body.rstrip())  # a fenced continuation that does not define the function
    chat = f"<think>shift adds one</think>Here it is:\n{fenced_def}"
    completions = [body, wrong_body, fenced_def, fenced_body, chat, "", "<think>never closed"]
    assert FAST(completions, tests=[spec] * len(completions)) == [1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0]
    # the helper the test calls is the prefix's own: a program redefining it gains nothing
    cheat = body + "\n\ndef shift(s):\n    return s\n"
    assert FAST([cheat.replace("- 1", "- 0")], tests=[spec]) == [0.0]


def test_grading_is_done_once_per_distinct_program(monkeypatch):
    reward = CodeTests(timeout_s=3.0)
    seen = []
    original = CodeTests.grade_program
    monkeypatch.setattr(CodeTests, "grade_program", lambda self, p, t: seen.append(p) or original(self, p, t))
    assert reward([GOOD, WRONG, GOOD, GOOD, "none"], tests=[STDIO] * 5) == [1.0, 0.0, 1.0, 1.0, 0.0]
    assert len(seen) == 2


def test_outcome_shares_are_logged():
    logged = {}
    loop = fence("while True: pass")
    scores = CodeTests(timeout_s=1.0)([GOOD, WRONG, "none", loop], tests=[STDIO] * 4, log_metric=logged.__setitem__)
    assert scores == [1.0, 0.0, 0.0, 0.0]
    shares = {k.split("/", 1)[1]: v for k, v in logged.items() if v}
    assert shares == {"passed": 0.25, "wrong": 0.25, "no_code": 0.25, "timeout": 0.25}
