"""Class 4: the evaluation worker of assert tests is a sandboxed process of its own (whatever backend runs the
programs): what runs in it cannot read the trainer's environment or files, reach the network, write outside its
scratch, or leave anything behind for the next program. A dataset test that executes a program's result is
refused in every mode (status unsupported_test; tests/sandbox/test_eval_verdict_integrity.py), so these probes are
the test's own code: the confinement is the second line, under the refusal."""

import contextlib
import logging
import os
import socket
import threading

import pytest

from trl_ext.sandbox import eval_worker, judge, run_tests

from .._backends import EACH_BACKEND, sandbox_backend, sandbox_server  # noqa: F401

SECRET = "hf_FAKE_EVAL_WORKER_SECRET"


@pytest.fixture
def fresh_workers(monkeypatch):
    """Start the evaluation pool afresh (optionally with a forced confinement), forget cached first passes, and
    close the pool the test started (its idle workers would outlive the test)."""

    def start(how: str | None = None) -> None:
        if judge.EVALUATORS._pool is not None:
            judge.EVALUATORS._pool.close()
        monkeypatch.setattr(judge.EVALUATORS, "_pool", None)
        judge._first_pass.cache_clear()
        if how is not None:
            monkeypatch.setattr(eval_worker, "confinement", lambda: how)

    yield start
    if judge.EVALUATORS._pool is not None:
        judge.EVALUATORS._pool.close()
    judge._first_pass.cache_clear()


def _probe(check: str):
    """The verdict of a test whose own code is ``check`` (a probe run in the evaluation worker)."""
    return run_tests("def answer():\n    return 1\n", {"kind": "assert", "code": check + "\nassert ok and answer()"})


def _data_probe(expression: str):
    """The verdict of a test that executes the program's answer (refused: program data never runs)."""
    program = f"def answer():\n    return {expression!r}\n"
    return run_tests(program, {"kind": "assert", "code": "ns = {}\nexec(answer(), ns)\nassert ns['ok'] is True"})


@pytest.fixture
def host(tmp_path, monkeypatch):
    """A secret in the environment and in a file, a listening socket on loopback, a path to (not) write. The judge's
    checks of a test's text (a test opening files is refused before it runs) are off here: what is tested is the
    worker's confinement, the line behind them."""
    monkeypatch.setattr(judge, "unsupported_plan", lambda test, names, prefix=None: "")
    monkeypatch.setattr(judge, "program_refusal", lambda program, test, names, prefix=None: "")
    judge.forget_tests()  # no refusal cached from an earlier test's text
    monkeypatch.setenv("HF_TOKEN", SECRET)
    secret_file = tmp_path / "token"
    secret_file.write_text(SECRET)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    accepted = []

    def accept():
        with contextlib.suppress(OSError):  # closed at the end of the test
            accepted.append(server.accept())

    threading.Thread(target=accept, daemon=True).start()
    yield {"file": secret_file, "port": server.getsockname()[1], "marker": tmp_path / "written", "accepted": accepted}
    server.close()


def _confined_checks(host) -> dict[str, str]:
    return {
        "env": "import os\nok = 'HF_TOKEN' not in os.environ and all('FAKE' not in v for v in os.environ.values())",
        "file": f"try:\n    open({str(host['file'])!r}).read()\n    ok = False\nexcept OSError:\n    ok = True",
        "network": f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {host['port']}), 2)\n"
        "    ok = False\nexcept OSError:\n    ok = True",
        "write": f"try:\n    open({str(host['marker'])!r}, 'w').write('x')\n    ok = False\nexcept OSError:\n    ok = True",
        "system": "try:\n    open('/usr/trl_ext_probe', 'w')\n    ok = False\nexcept OSError:\n    ok = True",
        "uid": "import os\nok = os.getuid() != 0 and os.geteuid() != 0" if os.geteuid() == 0 else "ok = True",
    }


@EACH_BACKEND
@pytest.mark.parametrize("how", ["auto", "landlock"])
def test_a_test_that_executes_program_data_runs_confined(host, fresh_workers, how):
    fresh_workers(None if how == "auto" else how)
    failed = {
        name: r.statuses for name, check in _confined_checks(host).items() if not (r := _probe(check)).all_passed
    }
    assert failed == {}
    assert not host["marker"].exists() and host["accepted"] == []
    assert not os.path.exists("/usr/trl_ext_probe")


@EACH_BACKEND
def test_nothing_one_program_does_in_the_worker_reaches_the_next(fresh_workers):
    fresh_workers()
    patch = "import builtins\nbuiltins.sorted = lambda x: [1, 2, 3]\nbuiltins.trl_ext_probe = 1\nok = True"
    probe = _probe(patch)  # the patch ran, in that evaluation's own process, which refuses it before a call
    assert "unsupported_test" in probe.statuses and "builtins.sorted" in probe.detail  # (class 9: modules watched)
    assert "unsupported_test" in _data_probe(patch).statuses  # as program data it never runs
    spec = {
        "kind": "assert",
        "code": "import builtins\nassert not hasattr(builtins, 'trl_ext_probe')\nassert sorted(items()) == [1, 2, 3]",
    }
    assert not run_tests("def items():\n    return [3, 1]\n", spec).all_passed
    assert run_tests("def items():\n    return [3, 1, 2]\n", spec).all_passed


def test_without_a_local_sandbox_executing_tests_are_refused_and_logged(fresh_workers, caplog, host):
    fresh_workers("none")
    with caplog.at_level(logging.WARNING, logger="trl_ext.sandbox"):
        report = _data_probe("import os\nos.system('touch " + str(host["marker"]) + "')\nok = True")
    assert not report.all_passed and "unsupported_test" in report.statuses
    assert not host["marker"].exists()
    assert any("unconfined" in r.getMessage() for r in caplog.records)
    for expression in ("__import__('pickle').loads(__import__('pickle').dumps(print))", "eval('1')"):
        spec = {"kind": "assert", "code": f"assert {expression} == thing()"}
        assert "unsupported_test" in run_tests("def thing():\n    return 1\n", spec).statuses
    plain = {"kind": "assert", "code": "import collections\nassert collections.Counter(thing()) == {'a': 2}"}
    assert run_tests("def thing():\n    return 'aa'\n", plain).all_passed  # ordinary tests still run there
