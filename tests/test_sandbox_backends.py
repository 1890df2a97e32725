"""Backend selection (TRL_EXT_SANDBOX_BACKEND, auto), the landlock backend as a non-root uid without user
namespaces, the remote backend's SandboxFusion mapping and retries, and `trl-ext sandbox-serve` (health, 400,
413, 429, a server killed mid-batch). Network traffic only ever goes to 127.0.0.1."""

import json
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from trl_ext.rewards import CodeTests
from trl_ext.sandbox import Limits, SandboxUnavailable, bwrap, forkserver, landlock, run, run_tests, selection
from trl_ext.sandbox.remote import RemoteBackend, to_run_result

from ._backends import start_server, stop_server
from .sandbox._non_root_selection import NON_ROOT_SELECTION

SANDBOX_FOLDER_FILES = "test_seccomp or test_memory_bound or test_scratch or test_eval_worker_confinement"

ROOT = Path(__file__).resolve().parent.parent
STDIO = {"kind": "stdio", "cases": [{"input": "2 3\n", "output": "5"}, {"input": "10 -4\n", "output": "6"}]}
GOOD = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"


def _post(url: str, body: bytes, timeout: float = 30.0) -> tuple[int, dict | str]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


# --- selection ---------------------------------------------------------------------------------------------


def test_env_variable_sets_the_default_and_an_explicit_backend_wins(monkeypatch):
    where = "import os; print(os.getcwd())"
    monkeypatch.setenv("TRL_EXT_SANDBOX_BACKEND", "landlock")
    forkserver.close_all()
    # landlock: a fresh scratch directory (per run, or under its fork server's directory); bwrap: its own /tmp
    assert re.match(r"/tmp/trl-ext-(landlock|forkserver)-", run(where).stdout)
    assert [key[0] for key in forkserver._SERVERS] == (
        ["landlock"] if forkserver.enabled() and forkserver.supported() else []
    )
    assert run(where, backend="bwrap").stdout == "/tmp\n"
    assert run_tests("print(5)\n", {"kind": "stdio", "cases": [{"input": "", "output": "5"}]}).all_passed


def test_unknown_backend_or_malformed_url_is_a_value_error_naming_the_variable(monkeypatch):
    monkeypatch.setenv("TRL_EXT_SANDBOX_BACKEND", "docker")
    with pytest.raises(ValueError, match="TRL_EXT_SANDBOX_BACKEND"):
        run("print(1)")
    with pytest.raises(ValueError, match="TRL_EXT_SANDBOX_BACKEND"):
        CodeTests()
    with pytest.raises(ValueError, match="`backend`"):
        run("print(1)", backend="bwarp")
    monkeypatch.setenv("TRL_EXT_SANDBOX_BACKEND", "remote")
    monkeypatch.delenv("TRL_EXT_SANDBOX_URL", raising=False)
    with pytest.raises(ValueError, match="TRL_EXT_SANDBOX_URL"):
        run("print(1)")
    for bad in ("ftp://host:1", "http//host:8080", "http://", "http://host:99999", "localhost:8080"):
        monkeypatch.setenv("TRL_EXT_SANDBOX_URL", bad)
        with pytest.raises(ValueError, match="TRL_EXT_SANDBOX_URL"):
            run("print(1)")
    with pytest.raises(ValueError, match="sandbox_url"):
        CodeTests(backend="remote", sandbox_url="not a url")


@pytest.fixture
def fresh_selection(monkeypatch):
    """Forget which backends passed their self-test, so that auto chooses again."""
    monkeypatch.setattr(selection, "_BACKENDS", {})
    monkeypatch.setattr(selection, "_CHECKED", set())
    monkeypatch.delenv("TRL_EXT_SANDBOX_BACKEND", raising=False)


def _break_bwrap(monkeypatch):
    monkeypatch.setattr(bwrap.BwrapBackend, "__init__", lambda self, bwrap=None: setattr(self, "bwrap", "/no/bwrap"))


def test_auto_takes_landlock_when_bwrap_fails_and_logs_it_once(fresh_selection, monkeypatch, caplog):
    _break_bwrap(monkeypatch)
    with caplog.at_level(logging.INFO, logger="trl_ext.sandbox"):
        first, second = selection.get_backend(), selection.get_backend("auto")
    assert first is second and first.name == "landlock"
    assert [r.getMessage() for r in caplog.records].count("trl_ext sandbox: using the landlock backend (auto)") == 1


def test_auto_never_falls_back_to_rlimit(fresh_selection, monkeypatch):
    _break_bwrap(monkeypatch)
    monkeypatch.setattr(landlock, "unavailable_reason", lambda: "Landlock is disabled (test)")
    with pytest.raises(SandboxUnavailable, match=r"bwrap.*landlock.*disabled \(test\).*sandbox-serve"):
        run("print(1)")
    assert "rlimit" not in selection._BACKENDS


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None or os.geteuid() != 0, reason="needs bwrap, started as root")
def test_landlock_as_a_non_root_uid_where_user_namespaces_are_refused():
    """The containment suite on landlock as uid 1000 inside a user namespace that may not create another one
    (what a Docker/Kubernetes pod with the default seccomp profile gives): auto must choose landlock."""
    inner = (
        "unshare -U true 2>/dev/null && exit 3; "  # the point of this test: no new user namespace here
        "python -c 'from trl_ext.sandbox import get_backend; assert get_backend().name == \"landlock\"' && "
        "exec python -m pytest -q -p no:cacheprovider tests/test_sandbox_adversarial.py "
        "tests/test_sandbox.py::test_stdio_cases_run_in_fresh_processes tests/test_sandbox.py::test_run_statuses "
        "tests/sandbox/test_seccomp.py tests/sandbox/test_memory_bound.py tests/sandbox/test_scratch.py "
        "tests/sandbox/test_eval_worker_confinement.py "
        "--deselect tests/sandbox/test_memory_bound.py::test_run_cgroups_are_emptied_and_reused "  # no cgroup there
        "--deselect tests/sandbox/test_memory_bound.py::test_a_reused_cgroup_holds_each_runs_bound "
        # what tests/sandbox/test_container_landlock.py already runs in this same container (the same bwrap
        # command and environment): those files' landlock tests; their other tests run here only
        f"-k {shlex.quote(f'not ({SANDBOX_FOLDER_FILES}) or not ({NON_ROOT_SELECTION})')}"
    )
    cmd = ["bwrap", "--bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--unshare-user"]
    cmd += ["--disable-userns", "--uid", "1000", "--gid", "1000", "--die-with-parent", "--chdir", str(ROOT)]
    env = {**os.environ, "TRL_EXT_TEST_BACKENDS": "landlock", "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env.pop("TRL_EXT_SANDBOX_BACKEND", None)
    done = subprocess.run([*cmd, "/bin/sh", "-c", inner], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert " passed" in done.stdout and "failed" not in done.stdout and "skipped" not in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["landlock", "remote"])
def test_grading_suites_on_each_backend(backend, request):
    """The code reward's grading and grading-hack suites with every run on ``backend`` (bwrap is their default
    when it works here). Only the test that fakes a local launch failure is left out for remote: that path does
    not exist there (the remote infra paths are tested above and below)."""
    env = {**os.environ, "TRL_EXT_SANDBOX_BACKEND": backend, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_code_grading_hacks.py"]
    cmd += ["tests/test_rewards_code.py"]
    if backend == "remote":  # the session's sandbox-serve (tests/conftest.py)
        env["TRL_EXT_SANDBOX_URL"] = request.getfixturevalue("session_sandbox_server")
        cmd += ["--deselect", "tests/test_rewards_code.py::test_infra_faults_score_none"]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert " passed" in done.stdout and "failed" not in done.stdout


# --- remote: protocol mapping and retries (a stub service) ------------------------------------------------------


def _sandboxfusion(status="Success", run_status="Finished", code=0, stdout="ready", stderr=""):
    run = {"status": run_status, "return_code": code, "stdout": stdout, "stderr": stderr, "execution_time": 0.1}
    return {"status": status, "message": "", "compile_result": None, "run_result": run, "files": {}}


def test_sandboxfusion_responses_map_to_run_statuses():
    limits = Limits(max_output_bytes=100)
    assert to_run_result(_sandboxfusion(stdout="ready42\n"), limits, 0.0).stdout == "42\n"
    assert to_run_result(_sandboxfusion(stdout="ready42\n"), limits, 0.0).status == "ok"
    assert to_run_result(_sandboxfusion("Failed", code=1, stderr="boom"), limits, 0.0).status == "runtime_error"
    assert to_run_result(_sandboxfusion("Failed", code=1, stderr="MemoryError\n"), limits, 0.0).status == "memory"
    assert to_run_result(_sandboxfusion("Failed", "TimeLimitExceeded", None), limits, 0.0).status == "timeout"
    assert to_run_result(_sandboxfusion(stdout="ready" + "x" * 101), limits, 0.0).status == "output_limit"
    # nothing the program does can turn into infra_error, and no infra fault into a program status
    assert to_run_result(_sandboxfusion("SandboxError", "Error", None), limits, 0.0).status == "infra_error"
    assert to_run_result(_sandboxfusion(stdout="", code=1), limits, 0.0).status == "infra_error"
    never_ready = _sandboxfusion("Failed", code=125, stdout="ready", stderr="\ntrl-ext-bootstrap: harness_not_ready\n")
    assert to_run_result(never_ready, limits, 0.0).status == "infra_error"
    assert to_run_result({"status": "Success"}, limits, 0.0).status == "infra_error"
    assert to_run_result(["not", "a", "dict"], limits, 0.0).status == "infra_error"


class _Stub(BaseHTTPRequestHandler):
    replies: list = []
    seen: list = []

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Stub.seen.append(body)
        code, reply = _Stub.replies.pop(0) if _Stub.replies else (200, _sandboxfusion(stdout="ready7\n"))
        data = json.dumps(reply).encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def stub_service():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Stub.replies, _Stub.seen = [], []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_remote_speaks_run_code_and_retries_5xx_and_429(stub_service):
    _Stub.replies = [(503, {}), (429, {}), (500, {})]
    backend = RemoteBackend(stub_service, retries=3, backoff_s=0.01)
    result = backend.launch({"mode": "script", "code": "print(7)"}, b"in", Limits(timeout_s=2, memory_mb=300))
    assert result.status == "ok" and result.stdout == "7\n"
    assert len(_Stub.seen) == 4
    request = _Stub.seen[-1]
    assert (request["language"], request["stdin"], request["memory_limit_MB"]) == ("python", "in", 300)
    assert request["run_timeout"] > 2 and "os.execv" in request["code"]


def test_remote_gives_infra_error_when_the_service_stays_down(stub_service):
    _Stub.replies = [(502, {})] * 10
    backend = RemoteBackend(stub_service, retries=2, backoff_s=0.01)
    assert backend.launch({"mode": "script", "code": "print(1)"}, b"", Limits()).status == "infra_error"
    assert len(_Stub.seen) == 3
    _Stub.replies = [(400, {"error": "bad"})]  # a refusal is not retried
    assert backend.launch({"mode": "script", "code": "print(1)"}, b"", Limits()).status == "infra_error"
    assert len(_Stub.seen) == 4
    closed = RemoteBackend("http://127.0.0.1:9", retries=1, backoff_s=0.01)  # the discard port: refused
    result = closed.launch({"mode": "script", "code": "print(1)"}, b"", Limits())
    assert result.status == "infra_error" and "gave up" in result.stderr


# --- sandbox-serve ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_server():
    proc, url = start_server("--workers", "1", "--queue", "1", "--max-request-mb", "0.05")
    yield url
    stop_server(proc)


def test_serve_speaks_sandboxfusion(small_server):
    with urllib.request.urlopen(small_server + "/health", timeout=10) as reply:
        health = json.loads(reply.read())
    assert health["status"] == "ok" and health["backend"] in ("bwrap", "landlock")
    assert _post(small_server + "/nowhere", b"{}")[0] == 404
    ok = _post(
        small_server + "/run_code",
        json.dumps({"code": "print(input())", "language": "python", "stdin": "hi"}).encode(),
    )
    assert ok[0] == 200 and ok[1]["status"] == "Success" and ok[1]["run_result"]["stdout"] == "hi\n"
    failed = _post(small_server + "/run_code", json.dumps({"code": "1/0", "language": "python"}).encode())[1]
    assert failed["status"] == "Failed" and failed["run_result"]["return_code"] != 0
    slow = {"code": "while True: pass", "language": "python", "run_timeout": 1}
    assert (
        _post(small_server + "/run_code", json.dumps(slow).encode())[1]["run_result"]["status"] == "TimeLimitExceeded"
    )


def test_remote_programs_cannot_pass_for_an_infra_error(small_server):
    """Killing the relay that started it, or imitating its 'harness did not start' exit, is the program's fault."""
    backend = RemoteBackend(small_server, retries=0)
    limits = Limits(timeout_s=3)
    kill_parent = "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nimport time\ntime.sleep(1)"
    fake = "import sys\nsys.stderr.write('trl-ext-bootstrap: harness_not_ready\\n')\nsys.exit(125)"
    for code in (kill_parent, fake, "import os\nos._exit(125)"):
        result = backend.launch({"mode": "script", "code": code}, b"", limits)
        assert result.status == "runtime_error", (code, result)


def test_serve_rejects_bad_and_oversized_requests(small_server):
    assert _post(small_server + "/run_code", b"{not json")[0] == 400
    assert _post(small_server + "/run_code", json.dumps({"code": "1", "language": "klingon"}).encode())[0] == 400
    huge = json.dumps({"code": "#" + "x" * 100_000, "language": "python"}).encode()
    code, body = _post(small_server + "/run_code", huge)
    assert code == 413 and "bytes" in body
    assert _post(small_server + "/run_code", json.dumps({"code": "print(1)", "language": "python"}).encode())[0] == 200


def test_serve_answers_429_when_its_queue_is_full(small_server):
    slow = json.dumps({"code": "import time; time.sleep(1.5)", "language": "python"}).encode()
    codes = []
    threads = [
        threading.Thread(target=lambda: codes.append(_post(small_server + "/run_code", slow)[0])) for _ in range(4)
    ]
    for thread in threads:
        thread.start()
        time.sleep(0.05)
    for thread in threads:
        thread.join(30)
    assert sorted(codes) == [200, 200, 429, 429]  # one running, one waiting, the rest refused at once


def test_a_server_killed_mid_batch_gives_infra_error_and_the_caller_goes_on():
    proc, url = start_server("--workers", "2")
    port = url.rsplit(":", 1)[1]
    backend = RemoteBackend(url, retries=1, backoff_s=0.05, queue_s=5.0)
    reward = CodeTests(backend=backend, timeout_s=5.0, workers=8)
    slow_good = "```python\nimport time\ntime.sleep(4.0)\na, b = map(int, input().split())\nprint(a + b)\n```"
    metrics = {}
    batch = [GOOD, GOOD] + [slow_good] * 6

    def log_metric(name, value):
        metrics[name] = value

    threading.Timer(1.5, proc.kill).start()  # the slow ones are surely in flight or queued by then
    started = time.monotonic()
    scores = reward(batch, tests=[STDIO] * len(batch), log_metric=log_metric)
    proc.wait()
    assert time.monotonic() - started < 30  # the deadline and retries end the batch; nothing hangs
    assert all(score in (1.0, None) for score in scores[:2])  # the fast ones may have finished before the kill
    assert scores[2:] == [None] * 6  # lost runs are None (TRL ignores them), never a 0
    assert metrics["code_tests/infra_error"] == scores.count(None) / len(batch)
    # the trainer keeps going: the next step while the service is down, then once it is back
    down = reward([GOOD] * 2, tests=[STDIO] * 2, log_metric=log_metric)
    assert down == [None, None] and metrics["code_tests/infra_error"] == 1.0
    proc, url = start_server("--workers", "2", "--port", port)
    try:
        assert reward([GOOD] * 2, tests=[STDIO] * 2, log_metric=log_metric) == [1.0, 1.0]
    finally:
        stop_server(proc)


def test_a_busy_service_is_waited_for_not_counted_as_a_failure(stub_service):
    """A 429 (the service's places or its answers' memory are taken) is waited for within the request's deadline,
    not spent from the retries (red team round 13: four 429s in 7.5 s made right rows None)."""
    _Stub.replies = [(429, {})] * 8 + [(503, {})]
    backend = RemoteBackend(stub_service, retries=1, backoff_s=0.01)
    result = backend.launch({"mode": "script", "code": "print(7)"}, b"", Limits(timeout_s=2))
    assert result.status == "ok" and len(_Stub.seen) == 10  # 8 busy answers and one failure (its one retry) waited out
    _Stub.replies = [(503, {})] * 3
    assert backend.launch({"mode": "script", "code": "print(7)"}, b"", Limits(timeout_s=2)).status == "infra_error"


def test_a_busy_service_that_resets_a_large_request_is_waited_for():
    """Red team round 14 (remote_big_body_busy): a busy service reads at most 1 MiB of a body it refuses (429) and
    closes; a client still sending more gets a reset, not the 429, which counted as a failed attempt: 8 MiB stdio
    inputs came back None in 6 s. Such a reset of a large request is waited out like a 429."""
    proc, url = start_server("--workers", "1", "--queue", "1")
    slow = json.dumps({"code": "import time; time.sleep(4)", "language": "python"}).encode()
    holders = [threading.Thread(target=_post, args=(url + "/run_code", slow)) for _ in range(2)]
    try:
        for holder in holders:  # one running, one waiting: the service's places are taken
            holder.start()
            time.sleep(0.2)
        backend = RemoteBackend(url, retries=1, backoff_s=0.05, queue_s=30.0)
        program = {"mode": "script", "code": "import sys\nprint(len(sys.stdin.buffer.read()))"}
        result = backend.launch(program, b"x" * (8 << 20), Limits(timeout_s=10))
        assert (result.status, result.stdout) == ("ok", f"{8 << 20}\n"), result
    finally:
        for holder in holders:
            holder.join(30)
        stop_server(proc)


def test_a_request_past_the_services_limit_reset_while_sent_fails_at_once():
    """Red team round 15 (R15-4): a body past the service's request limit is refused (413) after 1 MiB was read, so
    the client, still sending, gets a reset; read as a busy service, it was waited out to the deadline, then None.
    The service's /health names its limit: past it, the program's request fails (output_limit) at once."""
    proc, url = start_server("--workers", "1", "--max-request-mb", "2")
    try:
        backend = RemoteBackend(url, retries=1, backoff_s=0.05, queue_s=30.0, protocol="bootstrap")
        started = time.monotonic()
        result = backend.launch({"mode": "script", "code": "print(1)"}, b"x" * (12 << 20), Limits(timeout_s=5))
        assert result.status == "output_limit" and time.monotonic() - started < 10, result
    finally:
        stop_server(proc)
