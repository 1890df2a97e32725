"""The program that runs INSIDE the sandbox (its source is passed to ``python -I -c``).

Self-contained: it must not import trl_ext (the package is not visible in the sandbox). Protocol, with the
file descriptors given in argv:
  argv[1]  payload fd (read once, closed): JSON {"mode", "code", "limits", "uid", ...}
  argv[2]  ready fd (written once, closed BEFORE the program runs): proves the sandbox itself came up, so a
           program cannot make its own failure look like an infrastructure fault
  argv[3]  nonce fd, assert mode only (read and closed before the program runs), else -1
Modes: "script" runs the code as __main__; "call" calls a function on each case's args and writes one
marker-prefixed JSON record per case to stdout (values strictly typed: no subclasses, so a rigged ``__eq__``
cannot even be encoded); "assert" runs the code then the tests in a separate thread and prints the nonce only
if all passed (see ``_assert_mode`` for why the program cannot reach the nonce).
"""

import _thread
import atexit
import base64
import builtins
import collections
import contextlib
import functools
import json
import os
import resource
import select
import signal
import sys
import time
import traceback

# Captured before the program runs: patching builtins, json or os afterwards does not reach the harness.
_type, _write, _exit, _str_join = type, os.write, os._exit, str.join
_json_str = json.encoder.encode_basestring_ascii  # C function, no patchable Python internals
_int_repr, _float_repr = int.__repr__, float.__repr__
_INF = float("inf")


def _read_fd(fd):
    with os.fdopen(fd, "rb", closefd=True) as f:
        return f.read()


def _apply_limits(limits, uid):
    for name, (soft, hard) in limits.items():
        resource.setrlimit(getattr(resource, name), (soft, hard))
    if os.geteuid() == 0:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        if os.getuid() == 0 or os.geteuid() == 0:
            raise RuntimeError("could not drop root privileges")


def _encode(value, depth=0):
    """JSON text of plain data with exact types (subclasses of int/str/list/... are refused); tuples become
    lists, dicts are tagged {"__dict__": ...}, non-finite floats {"__float__": ...}."""
    if depth > 100:
        raise TypeError("value nested too deeply")
    kind = _type(value)
    if kind is str:
        return _json_str(value)
    if kind is bool:
        return "true" if value else "false"
    if value is None:
        return "null"
    if kind is int:
        return _int_repr(value)
    if kind is float:
        if value != value or value in (_INF, -_INF):
            return '{"__float__": "' + ("nan" if value != value else "inf" if value > 0 else "-inf") + '"}'
        return _float_repr(value)
    if kind is list or kind is tuple:
        return "[" + _str_join(",", [_encode(v, depth + 1) for v in value]) + "]"
    if kind is dict:
        items = []
        for key, item in dict.items(value):
            if _type(key) is not str:
                raise TypeError("dict keys must be exactly str")
            items.append(_json_str(key) + ":" + _encode(item, depth + 1))
        return '{"__dict__": {' + _str_join(",", items) + "}}"
    raise TypeError("unsupported result type")


def _write_all(fd, data):
    while data:
        data = data[_write(fd, data) :]


def _flush_stdout():
    try:
        sys.stdout.flush()
    except BaseException:  # noqa: B036 - the program may have broken sys.stdout; its output is its problem
        return


def _new_namespace():
    return {"__name__": "__main__", "__builtins__": builtins}


def _resolve(namespace, fn_name):
    if callable(namespace.get(fn_name)):
        return namespace[fn_name]
    solution = namespace.get("Solution")
    if isinstance(solution, type) and callable(getattr(solution, fn_name, None)):
        return getattr(solution(), fn_name)  # LeetCode style
    raise NameError("the program defines no function named " + repr(fn_name))


def _silence_stderr():
    """Point fd 2 at /dev/null: debug prints on stderr, common in contest code, must not fill the run's
    stderr cap across many cases (only stdout is judged)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)


def _call_mode(payload, out_fd):
    marker = payload["marker"].encode()
    stop_on_failure = payload["stop_on_failure"]
    namespace = _new_namespace()
    _silence_stderr()
    try:
        exec(compile(payload["code"], "solution.py", "exec"), namespace)
        fn = _resolve(namespace, payload["fn_name"])
    except BaseException:  # noqa: B036 - SystemExit at import time is a failure, not an exit
        traceback.print_exc()
        _exit(1)
    for index, args in enumerate(payload["args"]):
        try:
            record, ok = '{"i": ' + _int_repr(index) + ', "ok": true, "value": ' + _encode(fn(*args)) + "}", True
        except BaseException:  # noqa: B036
            record, ok = '{"i": ' + _int_repr(index) + ', "ok": false}', False
        _flush_stdout()
        _write_all(out_fd, b"\n" + marker + str.encode(record) + b"\n")
        if not ok and stop_on_failure:
            break
    _exit(0)


_MEMORY_EXIT = 86  # exit code of a stdio case that ran out of memory


def _exit_code(exc):
    code = exc.code
    if code is None or _type(code) is int:
        return code or 0
    with contextlib.suppress(BaseException):
        sys.stderr.write(str(code) + "\n")
    return 1


def _case_child(code, stdin_fd, out_w, cpu_s):
    """In the forked child: wire stdin/stdout, run the program as __main__, exit like python would."""
    status = 1
    try:
        os.setpgid(0, 0)
        os.dup2(stdin_fd, 0)
        os.dup2(out_w, 1)
        _silence_stderr()
        os.closerange(3, 1 << 16)  # the harness's own descriptors (its stdout copy included)
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
        exec(compile(code, "solution.py", "exec"), _new_namespace())
        status = 0
        if "threading" in sys.modules:
            sys.modules["threading"]._shutdown()  # wait for non-daemon threads, as python does at exit
    except SystemExit as exc:
        status = _exit_code(exc)
    except MemoryError:
        status = _MEMORY_EXIT
    except BaseException:  # noqa: B036
        with contextlib.suppress(BaseException):
            traceback.print_exc()
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()
    _exit(status)


def _collect_case(pid, out_r, timeout, cap):
    """(status, output) of one forked case: reads its stdout until it exits, hits ``timeout`` or ``cap``."""
    output, deadline = bytearray(), time.monotonic() + timeout
    exited = drain_until = None
    eof = False
    while True:
        if exited is None:
            done, wait_status = os.waitpid(pid, os.WNOHANG)
            if done:
                exited, drain_until = wait_status, time.monotonic() + 0.05
        now = time.monotonic()
        if exited is not None and (eof or now >= drain_until):  # a leftover grandchild may hold the pipe
            return _case_status(exited), bytes(output)
        if now >= deadline:
            return "timeout", bytes(output[:cap])
        if eof:
            time.sleep(0.002)
            continue
        if select.select([out_r], [], [], min(0.01, deadline - now))[0]:
            chunk = os.read(out_r, 1 << 16)
            eof = not chunk
            output += chunk
            if len(output) > cap:
                return "output_limit", bytes(output[:cap])


def _case_status(wait_status):
    if os.WIFSIGNALED(wait_status):
        return "timeout" if os.WTERMSIG(wait_status) in (signal.SIGXCPU, signal.SIGKILL) else "runtime_error"
    code = os.WEXITSTATUS(wait_status)
    return "ok" if code == 0 else "memory" if code == _MEMORY_EXIT else "runtime_error"


def _stdio_mode(payload, out_fd):
    """Run the program once per input, each in a fresh fork of this (program-free) harness; write one
    marker-prefixed record per case with the status and the base64 output. Outputs are compared outside."""
    marker, timeout, cap = payload["marker"].encode(), payload["case_timeout"], payload["max_output"]
    cpu_s = int(timeout) + 1
    for index, data in enumerate(payload["inputs"]):
        stdin_fd = os.memfd_create("stdin", 0)
        _write_all(stdin_fd, str.encode(data))
        os.lseek(stdin_fd, 0, os.SEEK_SET)
        out_r, out_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            _case_child(payload["code"], stdin_fd, out_w, cpu_s)
        os.close(stdin_fd)
        os.close(out_w)
        status, output = _collect_case(pid, out_r, timeout, cap)
        os.close(out_r)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        if payload["kill_all"]:  # in a private pid namespace: every process of the program, daemons too
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(-1, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        record = {"i": index, "status": status, "out": base64.b64encode(output).decode()}
        _write_all(out_fd, b"\n" + marker + json.dumps(record).encode() + b"\n")
        if status != "ok" and payload["stop_on_failure"]:
            break
    _exit(0)


_SEALED_EVENTS = frozenset(
    {
        "sys._current_frames",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "ctypes.dlopen",
        "ctypes.dlsym",
        "ctypes.cdata",
        "ctypes.addressof",
        "ctypes.string_at",
        "ctypes.wstring_at",
    }
)


def _seal():
    """Close the routes from the program's thread to the harness's main thread: other threads' frames and
    the object graph (gc), raw memory (ctypes, /proc/self/mem). Audit hooks cannot be removed once added."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 0: /proc/self/mem closes to this uid
    for name in ("ctypes", "_ctypes"):
        sys.modules.pop(name, None)  # a fresh import goes through the hook below

    def hook(event, args, _sealed=_SEALED_EVENTS):
        if event in _sealed or (event == "import" and args[0] in ("ctypes", "_ctypes")):
            raise RuntimeError(event + " is not allowed in the sandbox")

    sys.addaudithook(hook)


def _assert_mode(payload, out_fd, nonce_fd):
    """The program and its tests run in a second thread started from C (its Python stack holds nothing but
    the program's own frames); that thread ends with a step releasing a lock only this frame can see. The
    nonce lives in this (main-thread) frame and is printed only once that lock is released."""
    nonce = _read_fd(nonce_fd)
    entry_point = payload.get("entry_point")
    if entry_point and not str.isidentifier(entry_point):
        raise ValueError("entry_point must be an identifier")
    namespace = _new_namespace()
    passed = _thread.allocate_lock()
    passed.acquire()
    steps = [compile(payload["code"], "solution.py", "exec"), compile(payload["tests"], "tests.py", "exec")]
    if entry_point:
        steps.append(compile("check(" + entry_point + ")", "tests.py", "exec"))
    namespaces = [namespace] * len(steps) + [{"release": passed.release}]
    steps.append(compile("release()", "harness", "exec"))
    _seal()
    _thread.start_new_thread(functools.partial(collections.deque, map(exec, steps, namespaces), 0), ())
    del steps, namespaces, namespace
    try:
        done = passed.acquire(timeout=0.01)
        while not done and _thread._count() > 0:
            done = passed.acquire(timeout=0.01)
        done = done or passed.acquire(timeout=0.01)  # it may release just before its thread ends
    except BaseException:  # noqa: B036 - e.g. _thread.interrupt_main() from the program
        done = False
    if not done:
        _write_all(2, b"\nthe tests did not finish\n")
        _exit(1)
    _flush_stdout()
    _write_all(out_fd, b"\n" + nonce + b"\n")
    _exit(0)  # also ends the program's threads and skips the atexit handlers it registered


def _main():
    payload_fd, ready_fd, nonce_fd = (int(a) for a in sys.argv[1:4])
    payload = json.loads(_read_fd(payload_fd))
    _apply_limits(payload["limits"], payload["uid"])
    out_fd = os.dup(1)  # private copy: the program may close or redirect fd 1
    os.set_inheritable(out_fd, False)
    os.write(ready_fd, b"ready")
    os.close(ready_fd)
    sys.argv = ["solution.py"]
    mode = payload["mode"]
    if mode == "script":
        os.close(out_fd)
        if nonce_fd >= 0:
            os.close(nonce_fd)
        del payload_fd, ready_fd, nonce_fd, out_fd
        code = payload.pop("code")
        exec(compile(code, "solution.py", "exec"), _new_namespace())
    elif mode == "call":
        _call_mode(payload, out_fd)
    elif mode == "stdio":
        _stdio_mode(payload, out_fd)
    elif mode == "assert":
        _assert_mode(payload, out_fd, nonce_fd)
    else:
        raise ValueError("unknown mode " + repr(mode))


_main()
