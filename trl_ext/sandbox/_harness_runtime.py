"""The judged modes of the in-sandbox harness ("calls" and "stdio"), loaded by ``_harness.py`` from its payload.

The judge compiles ``_harness_values.py`` and this file once, as one module (``judge.harness_runtime``), and sends
its bytecode (and source, for an interpreter of another version) in every payload, so a run does not pay for
compiling it. Stdlib C modules only, no trl_ext import; the harness executes it before the program runs, so the
names captured below are the genuine ones.

"calls" runs the program once in a forked child (which never holds the run's stdout), calls its functions on
each call's arguments (handed over one at a time, each after the previous result) and sends each result as plain data (``_harness_values.py``: values whose ``==``
the program's own code decides cannot be encoded); the harness numbers the results and writes one record per
call. "stdio" runs the program once per input in a fresh fork of the harness
and writes each case's status and raw output. Records are marker-prefixed lines on the harness's stdout.
"""

import gc
import posix as os  # os itself is a Python module with imports of its own
import resource
import select
import sys
import time

# Imports are kept to C modules: json, base64, re, contextlib or traceback would add to every run's start-up,
# and signal imports enum: its Linux numbers are spelt out instead.
_SIGKILL, _SIGXCPU = 9, 24
# Captured before the program runs: patching builtins, json or os afterwards does not reach the harness.
_write, _exit = os.write, os._exit
_perf_counter = time.perf_counter
_module_type = type(sys)

if False:  # never runs: ``judge.harness_runtime`` compiles _harness_values.py and this file as one module
    from trl_ext.sandbox._harness import (  # set by ``_harness._main``
        _frames_under_program,
        _hold_modules,
        _main_module,
        _program_file,
        _run_main,
    )
    from trl_ext.sandbox._harness_env import _redirect, _seed_random, _with_streams
    from trl_ext.sandbox._harness_live import _LOADED, _live_call, _module_state, _watch_modules
    from trl_ext.sandbox._harness_program import _describe
    from trl_ext.sandbox._harness_values import (
        _b64,
        _call_record,
        _decode_call,
        _float_repr,
        _int_repr,
        _type,
    )
    from trl_ext.sandbox._harness_workdir import _empty_directory


def _quietly(fn, *args):
    try:  # noqa: SIM105 - contextlib would cost start-up time
        fn(*args)
    except BaseException:  # noqa: B036 - best effort: the program may have broken what fn uses
        pass


def _reap():
    while os.waitpid(-1, os.WNOHANG)[0]:
        pass


def _reap_all(bound_s=0.5):
    """After kill(-1): wait (a bounded while) until every child, orphans included (this is their subreaper), is gone."""
    end = _perf_counter() + bound_s
    while _perf_counter() < end:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                time.sleep(0.0002)
        except ChildProcessError:
            return


def _write_all(fd, data):
    while data:
        data = data[_write(fd, data) :]


def _flush_stdout():
    try:
        sys.stdout.flush()
    except BaseException:  # noqa: B036 - the program may have broken sys.stdout; its output is its problem
        return


def _new_namespace(path=None):
    """The program's namespace: its module as ``python solution.py`` makes it (the harness's ``_main_module``), in
    place of the harness's ``__main__`` (``python -c`` made the harness ``__main__``: its namespace is out of the
    program's reach, red team R10J-1)."""
    return _main_module(path).__dict__


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
    devnull = os.open("/dev/null", os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)


def _calls_mode(payload, out_fd, payload_fd, read_frame, parse):
    """Run the program in a forked child that calls its functions on the calls it is handed one at a time and
    sends one result per line through a pipe; this process (which never runs program code) numbers them and writes
    the records. The child is forked before this process reads any call, and gets call k+1 (read from the payload
    only then) once call k's result came back: the program's memory never holds a call it has not been given.
    The child holds no descriptor of the run's stdout and this process is not dumpable (``_undumpable``), so what
    the program writes can reach the judge only as the bodies of its own calls' records."""
    marker = str.encode(payload.pop("marker"))
    read_fd, write_fd = os.pipe()
    call_r, call_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        for fd in (read_fd, out_fd, payload_fd, call_w):
            _quietly(os.close, fd)
        marker = out_fd = None  # noqa: F841 - nothing of the channel in the program's frames
        _calls_child(payload, call_r, write_fd, read_frame, parse)
    os.close(write_fd)
    os.close(call_r)
    lines, index = _lines(read_fd, pid), 0
    halts = {position: kind for position, kind in payload.get("halts") or ()}
    if payload.get("describe") is not None:  # the child's first line: what the test's names are in the program
        body = next(lines, None) or b""
        if body[:11] == b'{"names": [' and body[-2:] == b"]}":
            _write_all(out_fd, b"\n" + marker + body + b"\n")
    while (item := read_frame(payload_fd)) is not None:
        started = _perf_counter()
        try:
            _write_all(call_w, b"%010d" % len(item) + item)
        except OSError:  # the child is gone
            break
        body = next(lines, None)
        if body is None:
            break
        body = body if body[:1] == b"{" and body[-1:] == b"}" else b'{"garbled": true}'
        # the call's duration, measured here (the program cannot reach it) and written last: a "dt" the program
        # put in its body is a duplicate key, and JSON's last one wins
        took = str.encode(_float_repr(_perf_counter() - started))
        head = b"\n" + marker + b'{"i": ' + str.encode(_int_repr(index)) + b", "
        halt = _halts_here(halts.get(index), body)  # always written last too: the judge knows what the program saw
        tail = b', "dt": ' + took + (b', "halt": true}\n' if halt else b', "halt": false}\n')
        _write_all(out_fd, head + body[1:-1] + tail)
        if halt:
            break
        index += 1
    _quietly(os.kill, pid, _SIGKILL)
    # every process the program left, at once, where kill(-1) reaches only the run: one it cannot stop (a vfork
    # parent waiting in the kernel) held the trainer's stop-then-kill clean-up to its deadline (red team round 11)
    if payload.get("kill_all"):
        _quietly(os.kill, -1, _SIGKILL)
        _quietly(_reap_all)
    _quietly(_reap)
    _exit(0)


def _halts_here(kind, body):
    """Whether the run ends after this call (the judge's later calls were guesses made past an unknown result):
    "live" when the result the test iterated is (or holds) an iterator of the program, whose items come first;
    "more" when an iterator asked ahead has not ended yet. Ending hands the program no later call."""
    if kind == "live":
        return b'{"g' in body
    return kind == "more" and not body.startswith(b'{"ok": false, "raised": "StopIteration"')


def _lines(fd, pid, cap=1 << 26):
    """The lines the child writes to ``fd``, until it closes the pipe or exits (a grandchild may hold it)."""
    buffer, exited = bytearray(), False  # the unfinished line (appended to, never copied whole: linear)
    while len(buffer) <= cap:
        if not select.select([fd], [], [], 0.05)[0]:
            if exited:
                return
            exited = os.waitpid(pid, os.WNOHANG)[0] != 0
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return
        *lines, rest = chunk.split(b"\n")
        if lines:
            lines[0] = bytes(buffer) + lines[0]
            buffer = bytearray(rest)
            yield from lines
        else:
            buffer += rest


def _calls_child(payload, call_fd, write_fd, read_frame, parse):
    """In the forked child: run the program once, then call its functions on each call read from ``call_fd`` (one
    frame each, sent only after the previous result); one result body per line."""
    stop_on_failure, describe, listed = payload["stop_on_failure"], payload.get("describe"), payload.get("builtins")
    code = payload["code"]
    path = _program_file(code)
    namespace = _new_namespace(path)
    devnull = os.open("/dev/null", os.O_WRONLY)  # the program's prints are not judged: out of the way
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)
    _seed_random(payload.get("seed"))
    watch = [name for name in payload.get("watch") or () if _type(name) is str]
    del payload
    _watch_modules(watch)
    _python_recursion_limit(3 + 1)  # main, _calls_mode, this function; exec's own entry into the interpreter
    try:
        exec(compile(code, path or "solution.py", "exec"), namespace)
    except BaseException:  # noqa: B036 - SystemExit at import time is a failure, not an exit
        _exit(1)
    _python_recursion_limit(3)  # the calls come from this frame's callee, with no exec entry
    try:  # noqa: SIM105 - contextlib would cost start-up time
        _LOADED.append(_module_state(namespace))
    except BaseException:  # noqa: B036 - unreadable: every assert-test call then fails (_module_changed)
        pass
    if describe is not None:
        _write_all(write_fd, str.encode(_describe(namespace, describe, listed)) + b"\n")
    functions = {}
    while (item := read_frame(call_fd)) is not None:
        name, args, kwargs, want_args, *around = parse(bytes.decode(item))
        if _type(want_args) is list:  # an assert test's call: objects live for the whole run (_harness_live.py)
            streams = _redirect(around[0] if around else None)
            record = _live_call(name, args, kwargs, want_args, namespace, functions)
            _write_all(write_fd, str.encode(_with_streams(streams, record)) + b"\n")
            continue
        made = []
        args, kwargs = _decode_call(args, kwargs, made)
        if name not in functions:
            try:
                functions[name] = _resolve(namespace, name)
            except BaseException:  # noqa: B036
                functions[name] = None
        if functions[name] is None:
            record, ok = '{"ok": false, "raised": "NameError"}', False
        else:
            streams = _redirect(around[0] if around else None)
            record, ok = _call_record(functions[name], args, kwargs, want_args, made)
            record = _with_streams(streams, record)
        _write_all(write_fd, str.encode(record) + b"\n")
        if stop_on_failure and not ok:
            break
    _exit(0)


def _undumpable():
    """prctl(PR_SET_DUMPABLE, 0) through the C module of ctypes (importing ctypes itself costs ~10 ms): no
    process of the sandbox's uid may then open /proc/<harness>/fd/* or read the harness's memory. Best effort
    (no /proc, an interpreter without _ctypes): the judge's strict record parsing is the fix, this is depth.
    Not where /proc cannot be opened at all (Landlock grants no /proc: the program cannot reach it either): there
    the harness stays dumpable, so the trainer (same uid) can still read the run's descriptors, which its
    memory and scratch accounting needs (a process it cannot read counts as hiding and kills the run)."""
    try:
        if os.stat("/proc/self/fd").st_uid != os.geteuid():  # /proc/<pid> is root's once it is not dumpable
            return  # already so: dropping root to the sandbox uid made it (the kernel's suid_dumpable rule)
        os.close(os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY))  # PermissionError under Landlock
        import _ctypes

        # no ctypes class (every class stays listed by object.__subclasses__()): a C call with int arguments
        _ctypes.call_function(_ctypes.dlsym(_ctypes.dlopen(None), "prctl"), (4, 0, 0, 0, 0))  # PR_SET_DUMPABLE
    except BaseException:  # noqa: B036
        return


_MEMORY_EXIT = 86  # exit code of a stdio case that ran out of memory
# the Python installation's closed roots, reached through these descriptors (held_roots.py): the program keeps them
_HELD_FDS = sorted(int(fd) for fd in os.environ.get(b"TRL_EXT_HELD_FDS", b"").split(b",") if fd.isdigit())


def _close_descriptors():
    """Every descriptor above 2 but the held roots'."""
    low = 3
    for fd in _HELD_FDS:
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 16)


_main_depth = 0  # the frames under the harness's ``_main``, its own included (set by the harness: a fork server's)


def _python_recursion_limit(own_frames):
    """Give the program the recursion limit ``python solution.py`` gives it: the harness's frames under the
    program's (``_main_depth`` and ``own_frames``, the runtime's from its ``main`` to the caller) do not count
    (red team rounds 12 and 14; the harness's ``_frames_under_program``)."""
    _frames_under_program(_main_depth + own_frames)


def _case_child(code, path, stdin_fd, out_w, cpu_s):
    """In the forked child: wire stdin/stdout and run the program as __main__; never returns. What the program
    raises, SystemExit included, unwinds to the harness's top (nothing between catches it: ``_stdio_mode``,
    ``main``, ``_harness._main``, a fork server's ``_child`` and ``_serve``), and a program that ran to its end
    raises SystemExit there: CPython itself ends the process as it ends ``python solution.py`` (PyErr_Print,
    Py_FinalizeEx: red team rounds 13 to 16 found one missing step after another in a hand copy of that ending)."""
    os.setpgid(0, 0)
    os.dup2(stdin_fd, 0)
    os.dup2(out_w, 1)
    _silence_stderr()
    _close_descriptors()  # the harness's own (its stdout copy included)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    _python_recursion_limit(4 + 1)  # main, _stdio_mode, this function, _run_main; exec's own entry
    _hold_modules()
    try:
        _run_main(code, path, _new_namespace(path))  # no frame here holds its globals
    except MemoryError:
        _exit(_MEMORY_EXIT)
    raise SystemExit


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
        return "timeout" if os.WTERMSIG(wait_status) in (_SIGXCPU, _SIGKILL) else "runtime_error"
    code = os.WEXITSTATUS(wait_status)
    return "ok" if code == 0 else "memory" if code == _MEMORY_EXIT else "runtime_error"


def _anonymous_file(data):
    """A descriptor reading ``data`` from its start: a memfd, or where the seccomp filter refuses memfds (no memory
    cgroup bounds the run), a file of the working directory (the run's scratch) unlinked once open."""
    try:
        fd = os.memfd_create("stdin", 0)
    except OSError:
        while True:  # a name the program cannot foresee (it may have made files in the same directory)
            name = ".trl-ext-stdin-" + os.urandom(12).hex()
            try:
                fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                break
            except FileExistsError:
                continue
        os.unlink(name)
    _write_all(fd, data)
    os.lseek(fd, 0, 0)
    return fd


def _stdio_mode(payload, out_fd, payload_fd, read_frame, parse):
    """Run the program once per input, each in a fresh fork of this (program-free) harness; write one
    marker-prefixed record per case with the status and the base64 output. Outputs are compared outside. Input
    k is read from the payload only just before case k is forked: no case's memory holds a later input."""
    marker, timeout, cap = payload.pop("marker").encode(), payload["case_timeout"], payload["max_output"]
    cpu_s, path = int(timeout) + 1, _program_file(payload["code"])
    gc.freeze()  # a case's collection at its end (python's) walks the program's objects only, not the harness's
    index = -1
    while (item := read_frame(payload_fd)) is not None:
        index += 1
        if index:  # each case starts in the directory as the first did (red team round 14, R14J-11)
            _empty_directory()
            path = path and _program_file(payload["code"])
        stdin_fd = _anonymous_file(str.encode(parse(bytes.decode(item))))
        out_r, out_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            marker = None  # noqa: F841 - nothing of the channel in the program's frames (out_fd: closed there)
            _case_child(payload["code"], path, stdin_fd, out_w, cpu_s)
        os.close(stdin_fd)
        os.close(out_w)
        status, output = _collect_case(pid, out_r, timeout, cap)
        os.close(out_r)
        _quietly(os.killpg, pid, _SIGKILL)
        if payload["kill_all"]:  # in a private pid namespace: every process of the program, daemons too
            _quietly(os.kill, -1, _SIGKILL)
        _quietly(_reap)
        record = '{"i": ' + _int_repr(index) + ', "status": "' + status + '", "out": "' + _b64(output) + '"}'
        _write_all(out_fd, b"\n" + marker + str.encode(record) + b"\n")
        if status != "ok" and payload["stop_on_failure"]:
            break
    _exit(0)


def main(payload, out_fd, payload_fd, read_frame, parse):
    """Run the payload's mode on the items of ``payload_fd`` (``read_frame`` reads one, ``parse`` decodes its
    JSON); never returns (the harness process exits at the end of the mode). ``_harness._main`` made the process
    undumpable (``_undumpable``) and installed the audit hook before this."""
    if payload["mode"] == "calls":
        _calls_mode(payload, out_fd, payload_fd, read_frame, parse)
    elif payload["mode"] == "stdio":
        _stdio_mode(payload, out_fd, payload_fd, read_frame, parse)
    raise ValueError("unknown mode " + repr(payload["mode"]))
