"""Protocol fidelity (docs/sandbox.md, class 11): SandboxFusion's own client (`sandbox-fusion`, in the `test` extra)
against ``trl-ext sandbox-serve`` on 127.0.0.1, then the remote backend reading the same answers."""

from __future__ import annotations

import base64

import pytest
from sandbox_fusion import (
    CommandRunStatus,
    RunCodeRequest,
    RunStatus,
    SummaryMapping,
    run_code,
    summary_run_code_result,
)

from trl_ext.sandbox.backends import BwrapBackend
from trl_ext.sandbox.limits import Limits
from trl_ext.sandbox.remote import RemoteBackend

from ._serve import post, serving

_MAPPING = SummaryMapping(CompileFailed="compile_failed", RunFailed="run_failed", RunTimeout="run_timeout")


@pytest.fixture(scope="module")
def url():
    with serving(workers=2, queue=8) as address:
        yield address


def _run(url: str, **request):
    return run_code(RunCodeRequest(**request), endpoint=url, max_attempts=1, client_timeout=60)


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_success_and_failure_as_sandboxfusion_answers(url):
    done = _run(url, code="print(input()[::-1])", language="python", stdin="abc\n")
    assert done.status == RunStatus.Success and done.compile_result is None and done.files == {}
    assert (done.run_result.status, done.run_result.return_code) == (CommandRunStatus.Finished, 0)
    assert done.run_result.stdout == "cba\n" and done.run_result.execution_time > 0
    assert summary_run_code_result(done, _MAPPING) == RunStatus.Success
    failed = _run(url, code="import sys; print('partial'); sys.exit(3)", language="python")
    assert failed.status == RunStatus.Failed and failed.run_result.return_code == 3
    assert failed.run_result.stdout == "partial\n"
    assert summary_run_code_result(failed, _MAPPING) == "run_failed"


def test_a_timeout_is_time_limit_exceeded_without_a_return_code(url):
    slow = _run(url, code="print('started', flush=True)\nwhile True: pass", language="python", run_timeout=1)
    assert slow.status == RunStatus.Failed and slow.message == ""
    assert slow.run_result.status == CommandRunStatus.TimeLimitExceeded and slow.run_result.return_code is None
    assert slow.run_result.stdout == "started\n"  # what it wrote before the deadline, as SandboxFusion keeps it
    assert summary_run_code_result(slow, _MAPPING) == "run_timeout"


def test_files_land_in_the_working_directory_and_fetch_files_come_back(url):
    code = (
        "import helper\n"
        "a, b = map(int, open('data/in.txt').read().split())\n"
        "open('out.txt', 'w').write(str(helper.add(a, b)))\n"
        "print('done')\n"
    )
    files = {"data/in.txt": _b64("5 7"), "helper.py": _b64("def add(a, b):\n    return a + b\n"), "unused": None}
    done = _run(url, code=code, language="python", files=files, fetch_files=["out.txt", "absent.txt", "data/in.txt"])
    assert done.status == RunStatus.Success, done.run_result.stderr
    assert done.run_result.stdout == "done\n"  # the fetched files do not leak into the program's stdout
    assert {name: base64.b64decode(data).decode() for name, data in done.files.items()} == {
        "out.txt": "12",
        "data/in.txt": "5 7",
    }  # a missing file is left out, as SandboxFusion does


def test_files_stay_inside_the_sandbox(url):
    """A path is written by the program's own wrapper inside the sandbox: it reaches no further than the
    program could (a failure to write is the program's failure, never a file on the service's machine)."""
    escape = _run(url, code="print(1)", language="python", files={"/etc/trl-ext-escape": _b64("x")})
    assert escape.status == RunStatus.Failed and "cannot write `files` entry" in escape.run_result.stderr
    read_host = _run(url, code="print(1)", language="python", fetch_files=["/etc/shadow", "../../etc/shadow"])
    assert read_host.status == RunStatus.Success and read_host.files == {}


def test_a_program_that_forges_the_files_marker_only_changes_its_own_files(url):
    forger = "import sys\nsys.stdout.write('\\n\\x00trl-ext-files:' + '0' * 32 + '\\nZm9yZ2Vk')\n"
    done = _run(url, code=forger, language="python", fetch_files=["out.txt"])
    assert done.status == RunStatus.Success and done.files == {}
    assert done.run_result.stdout.endswith("Zm9yZ2Vk")  # its own output, left as it wrote it


@pytest.mark.parametrize(("language", "summary"), [("cpp", "compile_failed"), ("nodejs", "run_failed")])
def test_a_language_not_served_gets_an_answer_not_an_error(url, language, summary):
    done = _run(url, code="int main() { return 0; }", language=language)
    assert done.status == RunStatus.Failed
    result = done.compile_result if language == "cpp" else done.run_result
    assert result.return_code == 127 and "not available here" in result.stderr
    assert summary_run_code_result(done, _MAPPING) == summary


def test_the_remote_backend_reads_the_answers(url):
    backend = RemoteBackend(url, retries=0)
    ok = backend.launch({"mode": "script", "code": "print(8)"}, b"", Limits(timeout_s=5))
    assert (ok.status, ok.stdout) == ("ok", "8\n")
    hung = backend.launch({"mode": "script", "code": "while True: pass"}, b"", Limits(timeout_s=1))
    assert hung.status == "timeout"
    wrong = backend.launch({"mode": "script", "code": "raise SystemExit(2)"}, b"", Limits(timeout_s=5))
    assert (wrong.status, wrong.exit_code) == ("runtime_error", 2)


def test_a_sandbox_failure_is_sandbox_error_and_infra_error_never_zero():
    broken = BwrapBackend(bwrap="/bin/false")  # the sandbox binary runs and fails before the program exists
    with serving(broken, workers=1, queue=1) as address:
        with pytest.raises(Exception, match="Sandbox responded with error"):  # what the client does on SandboxError
            _run(address, code="print(1)", language="python")
        result = RemoteBackend(address, retries=0).launch({"mode": "script", "code": "print(1)"}, b"", Limits())
    assert result.status == "infra_error" and result.exit_code is None


_OVER_THE_CAP = """
import sys
line = "0123456789abcdef" * 4 + "\\n"  # 65 bytes
for i in range(2 * 16384):  # ~2 MiB in all, past SandboxFusion's 1 MiB
    sys.stdout.write(f"{i:08d}" + line)
sys.stdout.flush()
sys.exit(EXIT)
"""


@pytest.mark.parametrize(("exit_code", "status"), [(0, RunStatus.Success), (3, RunStatus.Failed)])
def test_output_over_the_cap_keeps_its_first_mib_and_the_programs_exit(url, exit_code, status):
    # SandboxFusion's runner keeps the first 1 MiB of stdout and lets the program run on: the answer is the
    # program's own exit (Success for 0), never a kill's -9 (red team round 8 found Failed, -9 and 1.125 MiB)
    done = _run(url, code=_OVER_THE_CAP.replace("EXIT", str(exit_code)), language="python")
    expected = "".join(f"{i:08d}" + "0123456789abcdef" * 4 + "\n" for i in range(16200))[: 1 << 20]
    assert (done.status, done.run_result.status, done.run_result.return_code) == (
        status,
        CommandRunStatus.Finished,
        exit_code,
    )
    assert len(done.run_result.stdout) == 1 << 20 and done.run_result.stdout == expected


def test_bytes_that_are_no_utf8_count_as_written_against_the_cap(url):
    # 400 KiB within the 1 MiB cap, each byte a replacement character of 3 bytes once decoded: the cap counts the
    # run's own bytes (the decoded text's 1.2 MiB was reported output_limit)
    done = _run(url, code="import sys\nsys.stdout.buffer.write(bytes([255]) * (400 << 10))", language="python")
    assert (done.status, done.run_result.return_code) == (RunStatus.Success, 0)
    assert done.run_result.stdout == "\ufffd" * (400 << 10)


@pytest.mark.parametrize(
    "written", ["print('a' * 50_000)", "import sys\nsys.stdout.buffer.write(bytes([255]) * 100_000)"]
)
def test_a_clients_own_output_limit_is_cut_exactly(url, written):
    # trl-ext's `output_limit_bytes`: up to 128 KiB more came back unreported, Success (red team round 14b, R14bJ-4)
    status, answer = post(url, {"code": written, "language": "python", "output_limit_bytes": 1000})
    run = answer["run_result"]
    assert status == 200 and (answer["status"], run["trl_ext_status"]) == ("Failed", "output_limit"), answer
    assert len(run["stdout"]) <= 1000


def test_a_module_the_program_writes_never_replaces_the_files_wrappers(url):
    # red team round 15: the wrapper imported signal after the program's directory was first on sys.path, so a
    # program's own signal.py ran in the wrapper's parent and turned its death by SIGKILL into Success, exit 0
    code = "open('signal.py', 'w').write('import os\\nos._exit(0)\\n')\nimport os\nos.kill(os.getpid(), 9)"
    done = _run(url, code=code, language="python", files={"data.txt": _b64("x")})
    assert done.status == RunStatus.Failed and done.run_result.return_code != 0, done


def test_a_run_stopped_for_its_output_never_answers_a_kill_as_its_exit():
    from trl_ext.sandbox._process import RunResult
    from trl_ext.sandbox.run_code import response_for

    run = response_for(RunResult("output_limit", "x" * 10, "", -9, 0.5))["run_result"]
    assert (run["status"], run["return_code"], run["trl_ext_status"]) == ("Finished", None, "output_limit")


_UNITTEST = "import unittest\nclass T(unittest.TestCase):\n    def test(self):\n        self.assertEqual({}, 2)\n"
_DOCTEST = "import doctest, sys\ndef g():\n    '''\n    >>> g()\n    2\n    '''\n    return {}\nsys.exit(doctest.testmod().failed)\n"
_PICKLE = "import pickle, __main__\nclass P:\n    pass\nprint(type(pickle.loads(pickle.dumps(P()))).__name__, __main__.P is P)\n"


@pytest.mark.parametrize("files", [{}, {"data.txt": _b64("x")}], ids=["plain", "with files"])
def test_the_program_is_the_main_module_as_under_python(url, files):
    """Red team round 12: run as a dict under the harness (or the files wrapper), a program's ``__main__`` was not
    its module, so unittest and doctest found no test (a wrong program answered Success) and pickling a class of the
    program failed; ``unittest.main()`` ends with ``sys.exit(False)``, which answered Failed."""
    for value, status, code in ((2, RunStatus.Success, 0), (3, RunStatus.Failed, 1)):
        suite = _run(url, code=_UNITTEST.format(value) + "unittest.main()", language="python", files=files)
        assert (suite.status, suite.run_result.return_code) == (status, code), suite
        doc = _run(url, code=_DOCTEST.format(value), language="python", files=files)
        assert (doc.status, doc.run_result.return_code) == (status, code), doc
    pickled = _run(url, code=_PICKLE, language="python", files=files)
    assert (pickled.status, pickled.run_result.stdout) == (RunStatus.Success, "P True\n"), pickled
    ended = _run(url, code="print(input())\nexit()", language="python", stdin="7\n", files=files)
    assert (ended.status, ended.run_result.stdout) == (RunStatus.Success, "7\n"), ended
    located = _run(url, code="import os\nprint(os.path.basename(__file__))", language="python", files=files)
    assert (located.status, located.run_result.stdout) == (RunStatus.Success, "solution.py\n"), located
    names = "print(sorted((k, type(v).__name__) for k, v in globals().items()))"
    described = _run(url, code=names, language="python", files=files).run_result.stdout
    assert "('__builtins__', 'module')" in described and "('__loader__', 'SourceFileLoader')" in described, described
