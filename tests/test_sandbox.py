"""trl_ext.sandbox: run(), statuses, limits, the judge (stdio / call / assert) and parent-side comparison."""

import ast
import json
import re

import pytest

from trl_ext import sandbox
from trl_ext.sandbox import (
    Limits,
    SandboxUnavailable,
    compare_stdio,
    get_backend,
    parse_tests,
    run,
    run_tests,
    values_equal,
)
from trl_ext.sandbox.backends import BwrapBackend, _self_test
from trl_ext.sandbox.limits import SAFE_ENV

from ._backends import EACH_BACKEND, current_backend, sandbox_backend, sandbox_server  # noqa: F401 - fixtures

FAST = Limits(timeout_s=3.0)


@EACH_BACKEND
def test_run_ok_with_stdin():
    result = run("import sys\nprint(sys.stdin.read().upper(), end='')", "hello\nworld\n")
    assert result.status == "ok"
    assert result.stdout == "HELLO\nWORLD\n"
    assert result.exit_code == 0
    assert result.wall_s > 0


@EACH_BACKEND
def test_run_statuses():
    assert run("raise ValueError('boom')").status == "runtime_error"
    assert run("import sys; sys.exit(3)").exit_code not in (0, None)
    assert run("while True: pass", timeout_s=1).status == "timeout"
    assert run("x = bytearray(1 << 30)", memory_mb=256).status == "memory"
    flood = run("print('x' * 10_000_000)")
    assert flood.status == "output_limit"
    assert len(flood.stdout) <= Limits().max_output_bytes


@EACH_BACKEND
def test_python_is_isolated_and_unprivileged():
    # -I less -E (PYTHONHASHSEED is read: one hash secret for every run); the environment is SAFE_ENV alone
    flags = "int(sys.flags.no_user_site and sys.flags.safe_path)"
    code = f"import os, sys; print({flags}, os.getuid() != 0, os.listdir(), os.getcwd(), sorted(os.environ))"
    result = run(code)
    assert result.status == "ok", result.stderr
    isolated, unprivileged, listed, cwd, env = result.stdout.split(" ", 4)
    assert (isolated, unprivileged, listed) == ("1", "True", "['solution.py']")  # its own source, as python's
    assert sorted(k for k in SAFE_ENV if k.startswith("PYTHON")) == ["PYTHONHASHSEED"]
    assert [k for k in ast.literal_eval(env) if k.startswith("PYTHON")] == ["PYTHONHASHSEED"]
    # bwrap's own tmpfs (per run, or each fork-server child's), or a fresh scratch directory (landlock per run, or
    # under its fork server's directory)
    assert cwd == "/tmp" or re.fullmatch(r"/tmp/trl-ext-(landlock-[^/]+|forkserver-\d+-[^/]+/run-[^/]+)", cwd), cwd
    assert "HF_TOKEN" not in env


@EACH_BACKEND
def test_stdio_judge_compares_whole_output_line_by_line():
    program = "n = int(input())\nfor i in range(n):\n    print(i, ' ')\n"
    tests = {"kind": "stdio", "cases": [{"input": "2\n", "output": "0\n1"}, {"input": "1", "output": "0\n\n"}]}
    report = run_tests(program, tests, limits=FAST)
    assert (report.passed, report.total, report.all_passed) == (2, 2, True)
    wrong = {"kind": "stdio", "cases": [{"input": "2", "output": "0"}, {"input": "1", "output": "0"}]}
    assert run_tests(program, wrong, limits=FAST).passed == 0


@EACH_BACKEND
def test_stdio_judge_stops_at_first_failure_in_binary_mode():
    cases = [{"input": "", "output": "no"}] + [{"input": "", "output": "yes"}] * 30
    spec = {"kind": "stdio", "cases": cases}
    binary = run_tests("import time\ntime.sleep(0.05)\nprint('yes')", spec, limits=FAST)
    assert binary.passed == 0 and not binary.all_passed
    assert len(binary.statuses) < 30  # graded as the cases finish: the run stopped early (replayed for remote)
    fraction = run_tests("print('yes')", spec, limits=FAST, stop_on_failure=False)
    assert (fraction.passed, len(fraction.statuses)) == (30, 31)


@EACH_BACKEND
def test_stdio_cases_run_in_fresh_processes():
    # case 0 leaves a daemon and a module-level side effect behind; case 1 must see neither
    program = (
        "import os, sys, time\n"
        "if input() == 'first':\n"
        "    if os.fork() == 0:\n"
        "        try:\n"
        "            os.setsid()\n"
        "        except OSError:\n"  # landlock denies setsid(): a process group of its own instead
        "            os.setpgid(0, 0)\n"
        "        while True:\n"
        "            open('beat', 'w').write(str(time.time()))\n"
        "            time.sleep(0.01)\n"
        "    sys.modules['builtins'].LEFTOVER = 1\n"
        "    print('started')\n"
        "else:\n"
        "    time.sleep(0.1)\n"  # each case starts in an emptied directory: only a live daemon writes 'beat' again
        "    alive = os.path.exists('beat')\n"
        "    print('daemon alive' if alive else 'clean', hasattr(sys.modules['builtins'], 'LEFTOVER'))\n"
    )
    cases = [{"input": "first", "output": "started"}, {"input": "second", "output": "clean False"}]
    if current_backend() == "remote" and not (
        get_backend("remote").speaks_payload() and get_backend("auto").kill_all_safe
    ):
        # through SandboxFusion's program the service's harness cannot kill(-1) between cases (it would kill the relay
        # that enforces the per-case deadline): a daemon that left its process group lives until the end of the run,
        # so only the fresh interpreter is checked here (sandbox-serve running the payload itself kills as locally)
        cases[1]["output"] = "daemon alive False"
    assert run_tests(program, {"kind": "stdio", "cases": cases}, limits=FAST).all_passed


@EACH_BACKEND
def test_call_judge_exact_types():
    program = "def f(x, y):\n    return {'sum': x + y, 'pair': (x, y), 'ok': True}\n"
    tests = {
        "kind": "call",
        "fn_name": "f",
        "cases": [{"args": [1, 2], "expected": {"sum": 3, "pair": [1, 2], "ok": True}}],
    }
    assert run_tests(program, tests, limits=FAST).all_passed
    bool_for_int = {
        "kind": "call",
        "fn_name": "f",
        "cases": [{"args": [1, 2], "expected": {"sum": 3, "pair": [1, 2], "ok": 1}}],
    }
    assert not run_tests(program, bool_for_int, limits=FAST).all_passed


@EACH_BACKEND
def test_call_judge_leetcode_solution_class_and_fraction():
    program = "class Solution:\n    def twice(self, x):\n        return x * 2 if x < 3 else 0\n"
    cases = [{"args": [1], "expected": 2}, {"args": [5], "expected": 10}, {"args": [2], "expected": 4}]
    report = run_tests(
        program, {"kind": "call", "fn_name": "twice", "cases": cases}, limits=FAST, stop_on_failure=False
    )
    assert (report.passed, report.total) == (2, 3)


@EACH_BACKEND
def test_assert_judge_humaneval_style():
    program = "def add(a, b):\n    return a + b\n"
    tests = {
        "kind": "assert",
        "code": "def check(candidate):\n    assert candidate(2, 3) == 5\n",
        "entry_point": "add",
    }
    assert run_tests(program, tests, limits=FAST).all_passed
    assert not run_tests("def add(a, b):\n    return a - b\n", tests, limits=FAST).all_passed


def test_compare_stdio_rules():
    assert compare_stdio("1 2\n3\n\n", "1 2\n3")
    assert compare_stdio("  a  \n b", "a\nb")
    assert not compare_stdio("1\n2", "1\n2\n3")
    assert not compare_stdio("0.3333", "0.333333")
    assert compare_stdio("0.3333", "0.333333", float_tol=1e-3)
    assert not compare_stdio("abc 0.3333", "abd 0.333333", float_tol=1e-3)
    # lines end at "\n" ("\r\n" too) and blanks are ASCII: no other character separates lines or tokens
    assert compare_stdio("1\r\n2\r\n", "1\n2")
    for separator in ("\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\x0b\n"[:1]):
        assert not compare_stdio(f"1{separator}2", "1\n2")
    assert not compare_stdio("1\x1f\n2", "1\n2")
    # with a tolerance, two integer tokens are still compared exactly, and "1_000" is no number
    assert not compare_stdio("1000000000000000000", "1000000000000000001", float_tol=1e-9)
    assert not compare_stdio("1_000_000_000_000_000_001", "1000000000000000001", float_tol=1e-9)
    assert compare_stdio("1.0 2", "1 2", float_tol=1e-9)


def test_values_equal_is_typed():
    assert values_equal([1, [2.0]], [1, [2]])
    assert not values_equal(True, 1)
    assert not values_equal(1, True)
    assert not values_equal("1", 1)
    assert not values_equal([1, 2], [1, 2, 3])
    assert values_equal(0.1 + 0.2, 0.3, float_tol=1e-9)
    assert not values_equal({"a": 1}, {"a": 1, "b": 2})


def test_parse_tests_errors_name_the_row_and_field():
    assert parse_tests(json.dumps({"kind": "assert", "code": "pass"}))["kind"] == "assert"
    with pytest.raises(ValueError, match=r"row 7.*kind"):
        parse_tests({"kind": "unit"}, where="row 7")
    with pytest.raises(ValueError, match=r"row 1, case 0: `output`"):
        parse_tests({"kind": "stdio", "cases": [{"input": "1"}]}, where="row 1")
    with pytest.raises(ValueError, match="not valid JSON"):
        parse_tests("{kind: stdio}")
    with pytest.raises(ValueError, match="fn_name"):
        parse_tests({"kind": "call", "cases": [{"args": [], "expected": 1}]})


def test_missing_bwrap_refuses_clearly():
    with pytest.raises(SandboxUnavailable, match=r"apt-get install bubblewrap.*backend=\"rlimit\""):
        _self_test(BwrapBackend(bwrap="/nonexistent/bwrap"))


def test_unknown_backend_is_rejected():
    with pytest.raises(ValueError, match="rlimit"):
        run("print(1)", backend="docker")


def test_rlimit_backend_runs_with_limits_and_scrubbed_env(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_fake_rlimit_secret")
    ok = run("import os; print(sorted(os.environ))", backend="rlimit")
    assert ok.status == "ok" and "hf_fake_rlimit_secret" not in ok.stdout and "HF_TOKEN" not in ok.stdout
    assert run("while True: pass", timeout_s=1, backend="rlimit").status == "timeout"
    assert run("x = bytearray(1 << 30)", memory_mb=256, backend="rlimit").status == "memory"


def test_public_api():
    assert set(sandbox.__all__) >= {"run", "run_tests", "RunResult", "Limits", "SandboxUnavailable"}
    with pytest.raises(ValueError, match="timeout_s"):
        Limits(timeout_s=0)


@EACH_BACKEND
def test_call_cases_each_get_the_timeout():
    cases = [{"args": [i], "expected": i} for i in range(40)]
    spec = {"kind": "call", "fn_name": "f", "cases": cases}
    hang = run_tests("def f(x):\n    while x == 0:\n        pass\n    return x", spec, limits=Limits(timeout_s=1.0))
    assert hang.statuses == ["timeout"] and hang.passed == 0
    assert hang.total == 40
    slow_program = "import time\ndef f(x):\n    time.sleep(0.6)\n    return x"
    slow = run_tests(slow_program, dict(spec, cases=cases[:4]), limits=Limits(timeout_s=2.0))
    assert slow.all_passed  # 2.4 s in all, but no case over 2 s


def test_launch_failure_is_an_infra_error():
    from trl_ext.sandbox.backends import RlimitBackend

    class Broken(RlimitBackend):
        def argv(self, harness_args, limits):
            return ["/nonexistent/python", *harness_args[1:]]

    result = Broken().launch({"mode": "script", "code": "print(1)"}, b"", FAST)
    assert result.status == "infra_error" and "could not launch" in result.stderr


@EACH_BACKEND
def test_debug_output_on_stderr_does_not_fail_many_cases():
    program = "import sys\nn = int(input())\nsys.stderr.write('debug ' * 2000)\nprint(n * 2)\n"
    stdio = {"kind": "stdio", "cases": [{"input": str(i), "output": str(2 * i)} for i in range(30)]}
    assert run_tests(program, stdio, limits=FAST).all_passed
    call_program = "import sys\ndef f(x):\n    sys.stderr.write('debug ' * 2000)\n    return 2 * x\n"
    call = {"kind": "call", "fn_name": "f", "cases": [{"args": [i], "expected": 2 * i} for i in range(30)]}
    assert run_tests(call_program, call, limits=FAST).all_passed


def test_runs_from_a_virtual_environment_whose_python_lives_in_a_hidden_directory(tmp_path, monkeypatch):
    """A venv's python is a link, often under /tmp or $HOME, which the sandbox hides: it must use the real one."""
    import os
    import sys

    link = tmp_path / "venv" / "bin" / "python"
    link.parent.mkdir(parents=True)
    link.symlink_to(os.path.realpath(sys.executable))
    monkeypatch.setattr(sys, "executable", str(link))
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    result = run("print(6 * 7)", timeout_s=10)
    assert result.status == "ok" and result.stdout.strip() == "42", result
