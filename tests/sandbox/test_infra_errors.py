"""Class 3: only the infrastructure's own dedicated error means ``infra_error`` (a None reward, which TRL drops);
nothing a program does can cause it. For assert tests that error is ``judge.EvaluatorUnavailable``, raised only
when the evaluation worker pool cannot start a worker; for every kind, the backend's own "infra_error" status."""

from __future__ import annotations

import pytest

from trl_ext.rewards import CodeTests
from trl_ext.sandbox import judge

# Programs whose failure an over-broad handler would mistake for the infrastructure's: Python's RecursionError
# is a RuntimeError, and so are NotImplementedError and friends.
FAILING = {
    "recursion": "def f(x):\n    return f(x)\n",
    "runtime error": "def f(x):\n    raise RuntimeError('evaluation worker did not start')\n",
    "not implemented": "def f(x):\n    raise NotImplementedError\n",
    "memory": "def f(x):\n    raise MemoryError\n",
    "deep result": "def f(x):\n    v = []\n    for _ in range(100000):\n        v = [v]\n    return v\n",
    "result nested to the bound": "def f(x):\n    v = 1\n    for _ in range(100):\n        v = [v]\n    return v\n",
    "exit code of a missing harness": "import os\ndef f(x):\n    os._exit(86)\n",
    "fake bootstrap message": (
        "import os, sys\nos.write(2, b'\\ntrl-ext-bootstrap: harness_not_ready\\n')\ndef f(x):\n    os._exit(3)\n"
    ),
    "kills its parent": "import os, signal\ndef f(x):\n    os.kill(os.getppid(), signal.SIGKILL)\n",
    "stop iteration": "def f(x):\n    raise StopIteration\n",
}
SPECS = {
    "assert": {"kind": "assert", "code": "assert f(1) == 2\nassert [f(2)] == [4]\n"},
    "call": {"kind": "call", "fn_name": "f", "cases": [{"args": [1], "expected": 2}]},
}


def test_no_program_failure_scores_none(backend):
    reward = CodeTests(timeout_s=3.0)  # infra_value=None: a None here would be a program causing infra_error
    programs = [f"```python\n{p}\n```" for p in FAILING.values()]
    for kind, spec in SPECS.items():
        scores = reward(programs, tests=[spec] * len(programs))
        assert dict(zip(FAILING, scores)) == dict.fromkeys(FAILING, 0.0), kind
    stdio = {"kind": "stdio", "cases": [{"input": "1", "output": "2"}]}
    stdio_programs = [
        "import sys\nsys.setrecursionlimit(10**6)\ndef r(n):\n    return r(n + 1)\nr(0)\n",
        "raise RuntimeError('worker did not start')\n",
        "import os\nos._exit(125)\n",
        "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n",
    ]
    scores = reward([f"```python\n{p}\n```" for p in stdio_programs], tests=[stdio] * len(stdio_programs))
    assert scores == [0.0] * len(stdio_programs)


class _BrokenPool:
    def __init__(self, error: BaseException) -> None:
        self.error = error

    def map(self, tasks, deadline_s):
        raise self.error


@pytest.fixture
def broken_evaluators(monkeypatch):
    """Replace the evaluation worker pool by one that raises the given error."""

    def install(error: BaseException) -> None:
        monkeypatch.setattr(judge, "_start_evaluators", lambda: _BrokenPool(error))
        monkeypatch.setattr(judge.EVALUATORS, "_pool", None)
        judge._first_pass.cache_clear()

    yield install
    judge._first_pass.cache_clear()


def test_only_a_worker_that_cannot_start_is_infrastructure(broken_evaluators):
    spec = SPECS["assert"]
    program = "```python\ndef f(x):\n    return 2 * x\n```"
    broken_evaluators(RuntimeError("worker ['python', 'replay.py'] did not start within 60 s"))
    reward = CodeTests(timeout_s=3.0)
    logged = {}
    assert reward([program], tests=[spec], log_metric=logged.__setitem__) == [None]
    assert logged["code_tests/infra_error"] == 1.0
    report = judge.run_tests("def f(x):\n    return 2 * x\n", spec)
    assert report.infra_error and not report.all_passed
    for error in (RecursionError("maximum recursion depth exceeded"), NotImplementedError("x")):
        broken_evaluators(error)  # a bug, not the infrastructure: it surfaces instead of becoming None
        with pytest.raises(type(error)):
            reward([program], tests=[spec])


def test_a_group_graded_at_once_makes_one_first_pass(monkeypatch):
    """The programs of one test graded concurrently share its first evaluation (the program-independent one)
    instead of each making its own; a first pass that raised leaves each program to make its own, so a broken
    worker is still each program's infrastructure error and never a verdict."""
    first_passes, real = [], judge.EVALUATORS.evaluate

    def counting(task, deadline_s):
        if "program" not in task:
            first_passes.append(task["test"])
        return real(task, deadline_s)

    monkeypatch.setattr(judge.EVALUATORS, "evaluate", counting)
    judge._first_pass.cache_clear()
    spec = {"kind": "assert", "code": "assert f(1) == 2\nassert f(5) == 10  # one group\n"}
    programs = ["def f(x):\n    return 2 * x\n", "def f(x):\n    return x + 1\n"] * 4
    scores = CodeTests(timeout_s=3.0, workers=8)([f"```python\n{p}```" for p in programs], tests=[spec] * 8)
    assert scores == [1.0, 0.0] * 4
    assert first_passes == [spec["code"]]
    judge._first_pass.cache_clear()
