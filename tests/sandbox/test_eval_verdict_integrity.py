"""Classes 3 and 4: an assert test's verdict is decided only by the trusted evaluation. Program data a test would
execute never runs (refused in every mode, directly or through a library), nothing one evaluation writes is read
as another's answer, and an evaluation worker that dies without answering is the infrastructure's failure (retried
once, then ``infra_error``), never the program's timeout."""

from __future__ import annotations

import json
import sys
import threading

import pytest

from trl_ext.rewards import CodeTests
from trl_ext.sandbox import judge, run_tests
from trl_ext.workers.pool import WorkerDied, WorkerPool

PASSED = json.dumps({"verdict": "passed", "detail": "", "calls": []}) + "\n"
# writes forged "passed" answers on every pipe the process holds
FORGE = (
    "import os, stat\nfor fd in range(3, 256):\n    try:\n        if stat.S_ISFIFO(os.fstat(fd).st_mode):\n"
    f"            os.write(fd, {PASSED!r}.encode() * 4)\n    except OSError:\n        pass\n"
)
# rebinds every assert hook of the test's namespaces up the stack to a no-op
PATCH_HOOK = (
    "import sys\nframe = sys._getframe()\nwhile frame:\n    for key in list(frame.f_globals):\n"
    "        if 'assert' in key.lower():\n            frame.f_globals[key] = lambda *a, **k: None\n"
    "    frame = frame.f_back\n"
)


@pytest.fixture
def fresh_workers():
    """A fresh evaluation pool and no cached first passes, closed afterwards."""
    if judge.EVALUATORS._pool is not None:
        judge.EVALUATORS._pool.close()
    judge.EVALUATORS._pool = None
    judge._first_pass.cache_clear()
    yield
    if judge.EVALUATORS._pool is not None:
        judge.EVALUATORS._pool.close()
    judge.EVALUATORS._pool = None
    judge._first_pass.cache_clear()


@pytest.mark.parametrize(
    "test",
    [
        "ns = {}\nexec(data(), ns)\nassert wrong(1) == 2",
        "assert eval(compile(data(), 'x', 'exec')) is None\nassert wrong(1) == 2",
        "import timeit\ntimeit.timeit(data(), number=1)\nassert wrong(1) == 2",
        "import ast\nexec(compile(ast.parse(data()), 'x', 'exec'), {})\nassert wrong(1) == 2",  # a tree is data too
        "import os\nos.popen(data()).read()\nassert wrong(1) == 2",  # the event is raised in os.py / subprocess.py
        "import subprocess\nsubprocess.run(data(), shell=True)\nassert wrong(1) == 2",
        "import subprocess\nsubprocess.getoutput(data())\nassert wrong(1) == 2",
    ],
    ids=["exec", "compile", "timeit", "ast-parse", "popen", "run-shell", "getoutput"],
)
@pytest.mark.parametrize("attack", ["forge", "patch-hook"])
def test_program_data_never_decides_its_verdict(backend, fresh_workers, test, attack):
    data = FORGE if attack == "forge" else PATCH_HOOK
    program = f"def data():\n    return {data!r}\n\ndef wrong(x):\n    return 0\n"
    report = run_tests(program, {"kind": "assert", "code": test})
    assert not report.all_passed and report.passed == 0 and not report.infra_error
    assert "unsupported_test" in report.statuses and "executes data" in report.detail


def test_ordinary_code_generation_of_the_standard_library_still_runs(fresh_workers):
    spec = {
        "kind": "assert",
        "code": "import collections, dataclasses\nP = collections.namedtuple('P', 'x y')\n"
        "@dataclasses.dataclass(frozen=True)\nclass Q:\n    x: int\nassert P(*pair()) == (1, 2) and Q(pair()[0]).x == 1",
    }
    assert run_tests("def pair():\n    return (1, 2)\n", spec).all_passed
    assert not run_tests("def pair():\n    return (2, 1)\n", spec).all_passed


def test_nothing_an_evaluation_writes_answers_the_next_programs(fresh_workers):
    """The (trusted) test itself writes extra "passed" lines on every pipe it can reach: none is read as a later
    program's verdict (the fork holds only its own answer pipe; a worker that writes more than asked is replaced)."""
    reward = CodeTests(workers=1)
    forger = {"kind": "assert", "code": FORGE + "assert f(1) == 2"}
    reward(["```python\ndef f(x):\n    return 2 * x\n```"], tests=[forger])
    for i in range(3):
        spec = {"kind": "assert", "code": f"assert g({i + 1}) == {2 * i + 2}"}
        assert reward(["```python\ndef g(x):\n    return 0\n```"], tests=[spec]) == [0.0]
        assert reward(["```python\ndef g(x):\n    return 2 * x\n```"], tests=[spec]) == [1.0]


def test_workers_outlive_the_thread_that_first_used_the_pool(fresh_workers):
    """bubblewrap's --die-with-parent fires when the starting THREAD exits: the pool starts its workers itself."""
    spec = {"kind": "assert", "code": "assert f(1) == 2"}
    program = "def f(x):\n    return 2 * x\n"
    first = []
    thread = threading.Thread(target=lambda: first.append(run_tests(program, spec).all_passed))
    thread.start()
    thread.join()
    pids = judge.EVALUATORS._pool.pids()
    assert first == [True] and pids
    threading.Event().wait(0.5)  # the parent-death signal, if any, has been delivered by now
    assert judge.EVALUATORS._pool.pids() == pids
    for i in range(3):
        assert run_tests(program, {"kind": "assert", "code": f"assert f({i}) == {2 * i}"}).all_passed
    assert judge.EVALUATORS._pool.pids() == pids


# answers {"ok": n} per task; a task {"die": k} exits without answering while the file's count is below k
_WORKER = """
import json, os, sys
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    task = json.loads(line)
    path = task.get("count")
    if path:
        n = int(open(path).read() or 0) if os.path.exists(path) else 0
        open(path, "w").write(str(n + 1))
        if n < task["die"]:
            os._exit(1)
    answer = json.dumps({"ok": task.get("n", 0)}) + "\\n"
    if task.get("twice"):  # both answers in one write: the pool reads them together, never one per task
        answer = json.dumps({"ok": 1}) + "\\n" + answer
    sys.stdout.write(answer)
    sys.stdout.flush()
"""


def test_a_worker_that_dies_is_retried_once_then_infrastructure(tmp_path, monkeypatch, fresh_workers):
    pool = WorkerPool([sys.executable, "-c", _WORKER], size=1, startup_timeout_s=30)
    try:
        assert pool.map([{"count": str(tmp_path / "a"), "die": 1, "n": 7}], 10) == [{"ok": 7}]
        with pytest.raises(WorkerDied):
            pool.map([{"count": str(tmp_path / "b"), "die": 2}], 10)
        with pytest.raises(WorkerDied):  # more than one answer: never read as the next task's
            pool.map([{"twice": True}], 10)
        assert pool.map([{"n": 3}], 10) == [{"ok": 3}]
    finally:
        pool.close()
    dead = "import sys\nprint('{\"ready\": true}', flush=True)\nsys.stdin.readline()\n"  # dies on every task
    monkeypatch.setattr(judge, "_start_evaluators", lambda: WorkerPool([sys.executable, "-c", dead], size=1))
    spec = {"kind": "assert", "code": "assert f(1) == 2"}
    report = run_tests("def f(x):\n    return 2 * x\n", spec)
    assert report.infra_error and "timeout" not in report.statuses
    assert CodeTests(timeout_s=3.0)(["```python\ndef f(x):\n    return 2 * x\n```"], tests=[spec]) == [None]
