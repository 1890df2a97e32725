"""Hostile programs against each isolated sandbox backend (bwrap, landlock, remote -> sandbox-serve) and the judge. Each run is bounded by a short timeout;
afterwards no sandbox process may be left and the machine must be intact (fake secrets unread and unchanged,
nothing written outside the sandbox's scratch)."""

import os
import socket
import time
from pathlib import Path

import pytest

from trl_ext.sandbox import Limits, run, run_tests

from ._backends import EACH_BACKEND, ISOLATED, now_ticks, sandbox_backend, serving_subprocess, wait_no_strays  # noqa: F401

SECRET = "hf_FAKE_SECRET_b1c9e4d0a7"
LIMITS = Limits(timeout_s=2.0, memory_mb=512)
_STARTED = now_ticks()


def _wait_no_strays(timeout_s: float = 3.0) -> list[int]:
    """Sandbox processes of this test process (or its sandbox-serve) still alive: see tests/_backends.py."""
    return wait_no_strays(_STARTED, timeout_s)


@pytest.fixture(scope="module")
def secrets_on_host(tmp_path_factory):
    """Fake secrets in the parent's env, a fake HF token under a fake $HOME, a fake dataset file."""
    home = tmp_path_factory.mktemp("home")
    token = home / ".cache" / "huggingface" / "token"
    token.parent.mkdir(parents=True)
    token.write_text(SECRET)
    dataset = tmp_path_factory.mktemp("data") / "expected_outputs.txt"
    dataset.write_text("EXPECTED-42\n")
    saved = {k: os.environ.get(k) for k in ("HF_TOKEN", "HOME", "HF_HOME")}
    os.environ.update(HF_TOKEN=SECRET, HOME=str(home), HF_HOME=str(token.parent))
    yield {"token": token, "dataset": dataset, "home": home}
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    assert token.read_text() == SECRET and dataset.read_text() == "EXPECTED-42\n"
    assert sorted(p.name for p in home.rglob("*")) == [".cache", "huggingface", "token"]
    assert _wait_no_strays() == []


@pytest.fixture(scope="module")
def sandbox_server(secrets_on_host):
    """This module's own ``sandbox-serve`` (not the session's), started with the fake secrets in its environment and
    the fake $HOME: programs run remotely must not reach them either."""
    with serving_subprocess("--workers", "2") as url:
        yield url


def _run(code: str, **kwargs):
    return run(code, limits=LIMITS, **kwargs)


@EACH_BACKEND
@pytest.mark.parametrize(
    "code",
    [
        "while True: pass",
        "import time; time.sleep(60)",
        "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True: pass",
    ],
    ids=["cpu_loop", "sleep", "sigterm_ignored"],
)
def test_runaway_programs_time_out(secrets_on_host, code):
    assert _run(code).status == "timeout"
    assert _wait_no_strays() == []


@EACH_BACKEND
def test_fork_bomb_is_contained(secrets_on_host):
    code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    assert _run(code).status in ("timeout", "runtime_error", "memory")  # memory: the run's total bound
    assert _wait_no_strays() == []


@EACH_BACKEND
@pytest.mark.parametrize("leave", ["os.setsid()", "os.setpgid(0, 0)"], ids=["setsid", "setpgid"])
def test_double_fork_daemon_does_not_outlive_the_run(secrets_on_host, leave):
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    try:\n"
        f"        {leave}\n"  # leave the run's session or process group (landlock denies setsid)
        "    except OSError:\n"
        "        os.setpgid(0, 0)\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(60)\n"
        "    os._exit(0)\n"
        "print('parent done')\n"
    )
    assert _run(code).status == "ok"  # the run ends with its main process, not with the daemon
    assert _wait_no_strays() == []


DAEMON = (
    "import os, time\n"
    "if os.fork() == 0:\n"
    "    os.setpgid(0, 0)\n"
    "    if os.fork() == 0:\n"
    "        time.sleep(60)\n"
    "    os._exit(0)\n"
    "print('parent done')\n"
)


@pytest.mark.parametrize("backend", [b for b in ISOLATED if b != "remote"])  # remote: the server's own setting
def test_the_per_run_path_leaves_nothing_either(secrets_on_host, backend, monkeypatch):
    """Fork servers are the default; a fresh sandbox per run (``TRL_EXT_SANDBOX_FORKSERVER=0``, and what runs
    where fork servers cannot) must contain runaway, forking and daemonizing programs as well."""
    monkeypatch.setenv("TRL_EXT_SANDBOX_FORKSERVER", "0")
    assert _run("while True: pass", backend=backend).status == "timeout"
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    assert _run(bomb, backend=backend).status in ("timeout", "runtime_error", "memory")
    assert _run(DAEMON, backend=backend).status == "ok"
    assert _wait_no_strays() == []


@EACH_BACKEND
def test_memory_bomb(secrets_on_host):
    assert _run("blocks = []\nwhile True:\n    blocks.append(bytes(1 << 26))\n").status == "memory"


@EACH_BACKEND
def test_tmp_fill_and_huge_file_are_capped(secrets_on_host):
    fill = "chunk = b'x' * (1 << 20)\nfor i in range(1000):\n    open(f'f{i}', 'wb').write(chunk)\n"
    assert _run(fill).status == "runtime_error"
    assert _run("open('big', 'wb').write(b'x' * (200 << 20))").status in ("runtime_error", "memory")


@EACH_BACKEND
@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_output_floods_are_cut(secrets_on_host, stream):
    result = _run(f"import sys\nwhile True:\n    sys.{stream}.write('y' * 65536)\n")
    assert result.status == "output_limit"
    assert len(result.stdout) <= LIMITS.max_output_bytes and len(result.stderr) <= LIMITS.max_stderr_bytes


@EACH_BACKEND
def test_secrets_are_unreachable(secrets_on_host):
    paths = [secrets_on_host["token"], secrets_on_host["dataset"], Path.home() / ".cache/huggingface/token"]
    code = (
        "import os, glob\n"
        "print(dict(os.environ))\n"
        "parents = ['/proc/%%d/environ' %% os.getppid(), '/proc/%%d/environ' %% os.getpid()]\n"
        f"for p in ['/proc/1/environ', '/proc/self/environ', '/proc/1/cmdline', '/proc/{os.getpid()}/environ'] + parents + %r:\n"
        "    try:\n"
        "        print(p, open(p, 'rb').read())\n"
        "    except OSError as e:\n"
        "        print(p, 'denied', e.errno)\n"
        "print(glob.glob('/root/*') + glob.glob('/home/*') + glob.glob('/work/*') + glob.glob('/tmp/pytest*'))\n"
    ) % [str(p) for p in paths]
    result = _run(code)
    assert result.status == "ok", result.stderr
    assert SECRET not in result.stdout + result.stderr
    assert "EXPECTED-42" not in result.stdout + result.stderr
    assert "HF_TOKEN" not in result.stdout


@EACH_BACKEND
def test_writes_outside_scratch_fail_and_scratch_is_private(secrets_on_host, tmp_path):
    marker = f"trl_ext_escape_{os.getpid()}"
    targets = [tmp_path / marker, secrets_on_host["home"] / marker, Path("/tmp") / marker, Path.cwd() / marker]
    code = (
        "import os\nprint('scratch', os.getcwd())\nopen('own', 'w').write('x')\n"
        "for p in %r:\n    try:\n        open(p, 'w').write('x')\n        print('wrote', p)\n"
        "    except OSError as e:\n        print('denied', p, e.errno)\n"
        "for p in ['/usr/x', '/x', '/proc/sys/kernel/hostname']:\n"
        "    try:\n        open(p, 'w').write('x')\n        print('wrote', p)\n    except OSError:\n        pass\n"
    ) % [str(t) for t in targets]
    result = _run(code)
    assert result.status == "ok", result.stderr
    scratch = result.stdout.split()[1]
    wrote = [line.split()[1] for line in result.stdout.splitlines() if line.startswith("wrote")]
    assert all(os.path.dirname(path) == scratch for path in wrote), result.stdout  # only the run's own scratch
    assert not any(t.exists() for t in targets)


@EACH_BACKEND
def test_network_is_unreachable(secrets_on_host):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # also stands in for a DNS server on 127.0.0.1
    udp.bind(("127.0.0.1", 0))
    udp.setblocking(False)
    dns_query = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01"
    code = (
        "import socket\ntry:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=1).sendall(b'{SECRET}')\n"
        "    print('connected')\nexcept OSError as e:\n    print('refused', e)\n"
        "try:\n"
        f"    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto({dns_query!r}, ('127.0.0.1', {udp.getsockname()[1]}))\n"
        "    print('sent udp')\nexcept OSError as e:\n    print('udp refused', e)\n"
    )
    result = _run(code)
    with pytest.raises(BlockingIOError):
        listener.accept()
    time.sleep(0.2)
    with pytest.raises(BlockingIOError):
        udp.recvfrom(512)  # nothing reached the host's UDP (DNS) port
    listener.close()
    udp.close()
    assert "connected" not in result.stdout  # (bwrap's own loopback may take the datagram; the host never sees it)


@EACH_BACKEND
def test_cannot_kill_the_parent(secrets_on_host):
    code = (
        "import os, signal\n"
        f"for pid in (os.getppid(), 1, {os.getpid()}, -1):\n"
        "    try:\n        os.kill(pid, signal.SIGKILL)\n    except OSError as e:\n        print(pid, e.errno)\n"
    )
    _run(code)
    assert os.getpid() > 0  # still alive
    assert run("print('still works')", limits=LIMITS).stdout == "still works\n"


ASSERT_TESTS = {"kind": "assert", "code": "assert f(2) == 5, 'wrong'"}


@EACH_BACKEND
@pytest.mark.parametrize(
    "program",
    [
        "import sys\ndef f(x): return x\nsys.exit(0)",
        "import os\ndef f(x): return x\nos._exit(0)",
        "import atexit, os\ndef f(x): return x\natexit.register(lambda: os._exit(0))",
        "def f(x):\n    raise SystemExit(0)",
        "import builtins\nbuiltins.AssertionError = type('Fake', (Exception,), {})\ndef f(x): return x",
        "import builtins, os\n_p = print\nbuiltins.print = lambda *a, **k: None\ndef f(x):\n    os.write(1, b'ok\\n')\n    os._exit(0)",
        # frame / gc walking for a secret, then printing every hex string found and exiting "successfully"
        "import gc, sys, os, re\ndef f(x):\n    seen = set()\n    frame = sys._getframe()\n    while frame:\n"
        "        seen.update(str(v) for v in frame.f_locals.values())\n        frame = frame.f_back\n"
        "    for obj in gc.get_objects():\n        if isinstance(obj, dict):\n"
        "            seen.update(str(v) for v in obj.values() if isinstance(v, (str, bytes)))\n"
        "    for s in seen:\n        for h in re.findall('[0-9a-f]{32}', s):\n            os.write(1, h.encode() + b'\\n')\n"
        "    os._exit(0)",
        # the nonce's file descriptor, read from every descriptor the process holds
        "import os\ndef f(x):\n    for fd in range(3, 64):\n        try:\n            os.write(1, os.read(fd, 64) + b'\\n')\n"
        "        except OSError:\n            pass\n    os._exit(0)",
        # the bottom of this thread's stack, every local of every frame, and the other threads' frames
        "import sys, os\ndef f(x):\n    fr = sys._getframe()\n    while fr:\n"
        "        for v in list(fr.f_locals.values()) + list(fr.f_globals.values()):\n"
        "            os.write(1, repr(v).encode() + b'\\n')\n        fr = fr.f_back\n"
        "    for fr in sys._current_frames().values():\n        os.write(1, repr(fr.f_locals).encode())\n    os._exit(0)",
        # the harness module's globals, and its memory through /proc/self/mem
        "import sys, os\ndef f(x):\n    main = sys.modules['__main__']\n    os.write(1, repr(vars(main)).encode() + b'\\n')\n"
        "    data = open('/proc/self/mem', 'rb')\n    os._exit(0)",
        "import _thread\n_thread.interrupt_main()\ndef f(x): return x",
    ],
    ids=[
        "sys_exit",
        "os_exit",
        "atexit",
        "exit_in_fn",
        "fake_assertion",
        "patched_print",
        "frame_gc_walk",
        "fd_scan",
        "frame_walk_all_threads",
        "globals_and_mem",
        "interrupt_main",
    ],
)
def test_assert_tests_cannot_be_passed_by_exiting_early(secrets_on_host, program):
    report = run_tests(program, ASSERT_TESTS, limits=LIMITS)
    assert report.total == 1 and report.passed == 0 and not report.infra_error


CALL_TESTS = {"kind": "call", "fn_name": "f", "cases": [{"args": [3], "expected": 9}, {"args": [4], "expected": 16}]}


@EACH_BACKEND
@pytest.mark.parametrize(
    "program",
    [
        "class Any:\n    def __eq__(self, other): return True\ndef f(x): return Any()",
        "class Int(int):\n    def __eq__(self, other): return True\ndef f(x): return Int(0)",
        "class S(str):\n    pass\ndef f(x): return S('9')",
        'import json\njson.dumps = lambda *a, **k: \'{"i": 0, "ok": true, "value": 9}\'\ndef f(x): return 0',
        "import builtins\nbuiltins.type = lambda *a: int\ndef f(x): return '9'",
        "import sys\ndef f(x):\n    for fr in [sys._getframe(1), sys._getframe(2)]:\n        for v in fr.f_locals.values():\n"
        "            if isinstance(v, dict) and 'expected' in v: return v['expected']\n    return None",
        "import os\ndef f(x):\n    for root, _, files in os.walk('/'):\n        for n in files:\n"
        "            if 'expected' in n: return open(os.path.join(root, n)).read()\n    return -1",
        "import sys\ndef f(x): sys.exit(0)",
    ],
    ids=["rigged_eq", "int_subclass", "str_subclass", "patched_json", "patched_type", "frame_walk", "disk", "exit"],
)
def test_call_results_cannot_be_rigged(secrets_on_host, program):
    report = run_tests(program, CALL_TESTS, limits=LIMITS, stop_on_failure=False)
    assert report.passed == 0 and not report.infra_error


@EACH_BACKEND
def test_stdio_expected_output_is_not_reachable(secrets_on_host):
    program = (
        "import os\nfor root, _, files in os.walk('/'):\n    for n in files:\n"
        "        if n.startswith('expected'):\n            print(open(os.path.join(root, n)).read())\n"
    )
    tests = {"kind": "stdio", "cases": [{"input": "", "output": "EXPECTED-42"}]}
    assert not run_tests(program, tests, limits=Limits(timeout_s=4.0)).all_passed


@EACH_BACKEND
def test_assert_tests_allow_ordinary_introspection(secrets_on_host):
    # reading frames (traceback.format_exc, inspect.stack) is refused in judged runs: docs/sandbox.md, class 1
    program = (
        "import collections, inspect, logging, traceback, typing\n"
        "Point = collections.namedtuple('Point', 'x y')\nT = typing.TypeVar('T')\nlogging.getLogger().info('ok')\n"
        "def f(x):\n    try:\n        raise ValueError\n    except ValueError as e:\n        traceback.format_exception_only(e)\n"
        "    return Point(x, 3).y + len(inspect.signature(f).parameters) + 1\n"
    )
    assert run_tests(program, ASSERT_TESTS, limits=LIMITS).all_passed
