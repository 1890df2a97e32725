"""The program that runs INSIDE the sandbox (its source is passed to ``python -sPS -c``: ``limits.ISOLATED``).

Self-contained: it must not import trl_ext (the package is not visible in the sandbox). Protocol, with the
file descriptors given in argv:
  argv[1]  payload fd: frames (``_read_frame``), a header {"mode", "code", "limits", "uid", ...} read before
           anything is forked, then one frame per call or stdio input, which the judged modes read one at a time,
           each only when they hand it on: no program process ever holds a call or input it was not given yet
  argv[2]  ready fd (written once, closed BEFORE the program runs): proves the sandbox itself came up, so a
           program cannot make its own failure look like an infrastructure fault
  argv[3]  unused, kept for compatibility (-1; a descriptor given here is closed before the program runs)
Mode "script" runs the code as __main__. The judged modes ("calls", "stdio") live in ``_harness_runtime.py``,
which the payload carries as {"runtime": {"source", "bytecode", "tag"}}: its bytecode is used when ``tag``
names this very interpreter, else its source is compiled (a remote executor may run another Python). Expected
values never enter the sandbox and every comparison happens in the judge, which accepts exactly one well-formed
record per case in order (``records.py``): a record a program manages to inject can only fail that program.
"""

import _json
import _struct
import binascii
import builtins
import gc
import marshal
import posix as os  # os itself is a Python module with imports of its own
import resource
import sys

# Imports are kept to C modules: the start-up of every run pays for each import (and for compiling this file).

if False:  # never runs: ``base.HARNESS_SOURCE`` is _harness_python.py, then this file, as one source
    from trl_ext.sandbox._harness_python import (
        _depth,
        _frames_under_program,
        _hold_modules,
        _main_module,
        _program_file,
        _program_getrecursionlimit,
        _run_main,
    )


# Builtins as the harness found them, before any program: the functions defined below, and the runtime's (run over
# this dict too), read builtin names from this copy, so a program that rebinds one in the builtins module
# (``builtins.all = ...``, reached through any builtin's ``__self__``) changes its own lookups, never the judge's
# checks (red team round 10). Nothing the program reaches holds it.
__builtins__ = dict(vars(builtins))


# What the C scanner of ``json`` reads from its decoder (importing ``json`` itself pulls in ``re``): read once, when
# the scanner is made. No class of the harness's: every class is listed by ``object.__subclasses__()``.
_SCAN = _json.make_scanner(
    type(sys.implementation)(  # types.SimpleNamespace, a C type
        strict=True, object_hook=None, object_pairs_hook=None, memo=None,
        parse_float=float, parse_int=int, parse_constant=float,
    )
)  # fmt: skip


def _parse_json(text):
    value, end = _SCAN(text, 0)
    if text[end:].strip():
        raise ValueError("trailing data after the payload")
    return value


def _read_exact(fd, size):
    chunks = []
    while size and (chunk := os.read(fd, min(size, 1 << 20))):
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks), size


def _read_frame(fd):
    """One frame of ``fd`` (the payload, or a calls child's pipe): 10 ASCII digits giving the length, then that
    many bytes (``base.frame``); None at the end. Reads exactly one frame: nothing after it enters memory."""
    digits, missing = _read_exact(fd, 10)
    if not digits:
        return None
    body, short = _read_exact(fd, int(digits) if not missing and digits.isdigit() else 0)
    if missing or short or not digits.isdigit():
        raise ValueError("truncated frame")
    return body


def _apply_limits(limits, uid):
    for name, (soft, hard) in limits.items():
        resource.setrlimit(getattr(resource, name), (soft, hard))
    if os.geteuid() == 0:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        if os.getuid() == 0 or os.geteuid() == 0:
            raise RuntimeError("could not drop root privileges")


_SPAWNERS = (  # every way a Python program starts a thread or process (subprocess, multiprocessing, pty use these)
    "start_new_thread", "start_new", "start_joinable_thread", "_start_new_thread", "_start_joinable_thread",
    "fork", "forkpty", "posix_spawn", "posix_spawnp", "system", "fork_exec",
)  # fmt: skip


def _note_refusals():
    """Wrap each of ``_SPAWNERS`` so that a refused one (EAGAIN/ENOMEM, "can't start new thread": the uid's
    process limit, which runs sharing one uid's budget share) leaves ``.trl-ext-refused`` in the run's scratch
    (the working directory now): the trainer then runs a failed program once more, alone
    (``trl_ext.sandbox.admission``). A program that forges or hides the file only changes its own reruns.
    ``_posixsubprocess`` (subprocess's fork) is wrapped when first imported: loading it costs milliseconds.
    The wrappers and the finder are the program's to call, so they are made over a namespace of their own
    (``_own_namespace``): through their globals and cells it reaches builtins and them, never the harness."""
    _own_namespace(_wrap_spawners, os=os, _SPAWNERS=_SPAWNERS)(_own_namespace(_wrap_on_import))


def _own_namespace(function, **names):
    """``function`` over a namespace holding only the builtins, ``sys`` and ``names`` (the functions it makes
    inherit it): what a program reads or rewrites there is its own (red team R10J-1)."""
    space = {"__builtins__": builtins, "sys": sys, **names}  # the program's own builtins
    return type(_own_namespace)(function.__code__, space, function.__name__, function.__defaults__)


def _wrap_spawners(finder_for):
    import _thread

    flag = os.getcwd() + "/.trl-ext-refused"

    def mark():
        try:  # noqa: SIM105 - contextlib would cost start-up time
            os.close(os.open(flag, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
        except BaseException:  # noqa: B036 - best effort: the program may have made its scratch unwritable
            pass

    def wrap(start):
        def wrapper(*args, **kwargs):
            try:
                result = start(*args, **kwargs)
            except (OSError, RuntimeError) as exc:
                if not isinstance(exc, OSError) or exc.errno in (11, 12):  # EAGAIN, ENOMEM
                    mark()
                raise
            if result == -1 and start.__name__ == "system":
                mark()
            return result

        return wrapper

    def wrap_all(module):
        for name in _SPAWNERS:
            start = getattr(module, name, None)
            if type(start) is type(len):  # a builtin, not wrapped yet
                setattr(module, name, wrap(start))
        return module

    for module in (
        _thread,
        os,
        *(sys.modules[n] for n in ("os", "threading", "_posixsubprocess") if n in sys.modules),
    ):
        wrap_all(module)
    if "_posixsubprocess" not in sys.modules:
        sys.meta_path.insert(0, finder_for("_posixsubprocess", wrap_all))


def _wrap_on_import(name, wrap):
    """A finder for the front of ``sys.meta_path`` that hands module ``name`` to ``wrap`` once it is loaded: a
    namespace object (no class of the harness's) whose ``find_spec`` closes over ``name``, ``wrap`` and itself."""
    finder = type(sys.implementation)()

    def find_spec(wanted, path=None, target=None):
        if wanted != name:
            return None
        try:  # noqa: SIM105 - contextlib would cost start-up time
            sys.meta_path.remove(finder)
        except BaseException:  # noqa: B036 - the program may have replaced sys.meta_path
            pass
        for other in sys.meta_path:
            spec = other.find_spec(wanted, path, target)
            if spec is not None:
                break
        else:
            return None
        load = spec.loader.exec_module
        spec.loader.exec_module = lambda module: wrap(module) if load(module) is None else None
        return spec

    finder.find_spec = find_spec
    return finder


def _poll_where_epoll_is_refused():
    """Where the filter refuses epoll (runs that share their uid: ``seccomp.OWN_UID_ONLY``), remove
    ``select.epoll`` before the program runs: ``selectors.DefaultSelector`` is then ``PollSelector``, which asyncio
    uses too, so programs that wait on descriptors still work."""
    try:
        import select
    except ImportError:  # no extension modules on this path (the rlimit backend's start): no filter there either
        return
    try:
        select.epoll().close()
    except OSError:
        del select.epoll
        if "selectors" in sys.modules:  # imported before (a fork server's preloads): its choice is made already
            sys.modules["selectors"].DefaultSelector = sys.modules["selectors"].PollSelector


# rt_sigaction(2) by machine: the kernel's audit architecture and the syscall's numbers (<linux/audit.h>,
# <asm/unistd.h>; x86_64 also has x32's, 512 with the x32 bit). ``tests/sandbox/test_signal_and_garbage_routes.py``
# checks them against libseccomp's tables.
_SIGACTION = {"x86_64": (0xC000003E, (13, 0x40000000 | 512)), "aarch64": (0xC00000B7, (134,))}


def _sigaction_filter(machine):
    """A classic BPF seccomp program (``struct sock_filter`` entries) that refuses rt_sigaction with a new action
    (EPERM; a query, with none, stays allowed) and, on another architecture, every syscall."""
    arch, numbers = _SIGACTION[machine]
    count = len(numbers)
    check, allow, deny = 3 + count, 7 + count, 8 + count
    code = [(0x20, 0, 0, 4), (0x15, 0, deny - 2, arch), (0x20, 0, 0, 0)]  # A = arch; foreign: deny; A = nr
    for at, number in enumerate(numbers, start=3):
        code.append((0x15, check - at - 1, allow - at - 1 if at == check - 1 else 0, number))
    # args[1] (the new action's pointer), low then high word: NULL (a query) is allowed
    code += [(0x20, 0, 0, 24), (0x15, 0, deny - check - 2, 0), (0x20, 0, 0, 28), (0x15, 0, 1, 0)]
    code += [(0x06, 0, 0, 0x7FFF0000), (0x06, 0, 0, 0x00050000 | 1)]  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO|EPERM
    return b"".join(_struct.pack("<HBBI", *entry) for entry in code)


def _no_signal_handlers():
    """From here on no process of the run can install a signal handler: CPython calls a Python handler with the
    interrupted frame (the harness's own, between the program's calls), with no audit event, and
    ``signal.signal`` calls sigaction(2) before it stores the handler, failing with OSError where that fails.
    A second seccomp filter (filters stack; NO_NEW_PRIVS is set) refuses rt_sigaction with a new action. SIGINT
    goes back to SIG_DFL first: its C handler stays otherwise, and asyncio replaces a default SIGINT handler
    (it leaves SIG_DFL alone). Judged modes only; raises where the filter cannot be loaded (an unknown machine,
    no ``_ctypes``): the run then never reports ready, so the program never runs unguarded."""
    import _ctypes
    import _signal
    import array

    _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
    program = array.array("B", _sigaction_filter(os.uname().machine))
    # no ctypes class (object.__subclasses__() lists every class, red team R10J-1): a C call whose small ints
    # travel as ints and whose ``bytes`` travel as a pointer to their data (the sock_fprog, which holds the
    # address of the program's buffer that ``array`` gives)
    fprog = _struct.pack("<HxxxxxxQ", len(program) // 8, program.buffer_info()[0])
    prctl = _ctypes.dlsym(_ctypes.dlopen(None), "prctl")
    if _ctypes.call_function(prctl, (38, 1, 0, 0, 0)) != 0:  # PR_SET_NO_NEW_PRIVS
        raise RuntimeError("could not set no_new_privs")
    if _ctypes.call_function(prctl, (22, 2, fprog, 0, 0)) != 0:  # SECCOMP_MODE_FILTER
        raise RuntimeError("could not load the signal-handler filter")


# Audit events that reach frames (and through them any function's globals: the harness's own), every object of
# the process, or raw memory. Denied from the program's first instruction on (``_deny_frames``).
_DENIED_EVENTS = frozenset(
    {"sys._getframe", "sys._getframemodulename", "sys._current_frames", "sys.settrace", "sys.setprofile"}
    | {"sys.addaudithook", "gc.get_objects", "gc.get_referrers", "gc.get_referents"}
    | {"ctypes.dlsym", "ctypes.dlsym/handle", "ctypes.call_function", "ctypes.cdata", "ctypes.cdata/buffer"}
    | {"ctypes.string_at", "ctypes.wstring_at"}
    | {"cpython.PyInterpreterState_New"}  # a subinterpreter runs under no hook of this one: ctypes there reads ours
)
_FRAME_ATTRIBUTES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})  # CPython audits these reads


class FrameDenied(ValueError, AttributeError):
    """What the program gets instead of a frame: ``collections.namedtuple``, ``typing``, ``enum`` and ``logging``
    fall back as on Pythons without frames (they catch ValueError/AttributeError)."""


def _deny_frames():
    """An audit hook (it cannot be removed from Python) that refuses, by raising, every event of
    ``_DENIED_EVENTS``, a read of ``_FRAME_ATTRIBUTES`` and ``ctypes.dlopen`` of a library file (``import ctypes``
    opens the process itself only). Without a first frame, ``f_back``/``f_globals`` lead nowhere: the harness's
    namespaces stay out of the program's reach (red team R9b-1). It reads only its closure, never a global or a
    builtin the program could rebind. Installed after ``_undumpable`` (which calls libc through ``_ctypes``), in the
    judged modes only: a "script" run is plain Python (its tracebacks, ``ctypes``), and nothing judges it after.
    Returns the harness's own ``gc.get_referents`` (a dict view's dict, ``_harness_live``): allowed by a flag that
    only the hook's and this function's closures hold, set for that one C call. Also keeps ``gc.DEBUG_SAVEALL``
    from the program (``_collector_saves_nothing``)."""
    allowed = []
    guarded = _collector_saves_nothing()

    def hook(event, args, events=_DENIED_EVENTS, attributes=_FRAME_ATTRIBUTES, denied=FrameDenied, own=allowed):
        if event in events and not (own and event == "gc.get_referents"):
            raise denied(event + " is not available in the sandbox")
        if event == "object.__getattr__" and args[1] in attributes:
            raise denied(args[1] + " is not available in the sandbox")
        if event == "ctypes.dlopen" and args[0] is not None:
            raise denied("ctypes.dlopen is not available in the sandbox")
        if event in guarded:
            guarded[event](*args)

    def referents(*objects, get=gc.get_referents, own=allowed):
        own.append(True)
        try:
            return get(*objects)
        finally:
            own.pop()

    sys.addaudithook(hook)
    return referents


_PREFIXES = tuple({sys.base_prefix, sys.base_exec_prefix, sys.prefix, sys.exec_prefix})  # read before any program


def _installed(origin, prefixes=_PREFIXES):
    """Whether ``origin`` (an exact str) names a file of the interpreter's installation, which no run can write: an
    absolute path under its prefix with no ``.`` or ``..`` part (a symlink in it is the installation's own). A
    shared object the program wrote in its scratch would be native code in the harness's process."""
    parts = origin.split("/")
    return (
        origin[:1] == "/"
        and "." not in parts
        and ".." not in parts
        and "" not in parts[1:]
        and any(origin.startswith(prefix.rstrip("/") + "/") for prefix in prefixes)
    )


def _module_spec(name, origin):
    """The spec ``_imp``'s module makers are given by the guard below (what they read, each read once from the
    program's): a namespace object, as no class of the harness's may be (``object.__subclasses__()`` lists every
    class, and a method's ``__globals__`` would be this namespace: red team R10J-1)."""
    return type(sys.implementation)(name=name, origin=origin)


def _stand_in_codes():
    """The code of ``_collector_saves_nothing``'s stand-ins by event, compiled once as the harness loads (a fork
    server's children inherit it; compiling the three sources in every run cost ~0.3 ms): each run makes its own
    functions of it, over a namespace of their own."""
    make = "lambda spec, *file: (lambda made: audit(EVENT, spec.name, spec.origin, made) or made[0])([])"
    codes = {"trl_ext.gc.set_debug": "lambda flags: audit('trl_ext.gc.set_debug', flags)"}
    codes.update({event: make.replace("EVENT", repr(event)) for event in _IMP_EVENTS})
    return {event: compile(source, "<string>", "eval") for event, source in codes.items()}


_IMP_EVENTS = ("trl_ext._imp.create_builtin", "trl_ext._imp.create_dynamic")
_STAND_IN_CODES = _stand_in_codes()


def _collector_saves_nothing():
    """With ``gc.DEBUG_SAVEALL`` the collector keeps every unreachable object in ``gc.garbage``: frames of the
    program's own that an exception held, whose ``f_back`` leads to the harness's, with no audited event. So
    ``gc.set_debug`` and ``_imp``'s module makers (a fresh ``gc`` module, or ``_imp`` with the genuine makers:
    ``create_builtin``, and ``create_dynamic`` given libpython, which holds ``PyInit_gc``) become stand-ins that
    raise an event; the audit hook (``_deny_frames``) holds the genuine ones and calls them, refusing
    DEBUG_SAVEALL and a fresh ``gc`` or ``_imp`` (by the name the maker looks up: the last part), and any shared
    object but the interpreter's own (``_installed``): native code loaded in the process reaches it all. The stand-ins
    hold nothing of the harness (globals: ``sys.audit`` only); a program that raises the events itself meets the
    same refusals. Returns the hook's handlers by event."""
    import _imp

    set_debug, save_all = gc.set_debug, gc.DEBUG_SAVEALL
    makers = {"trl_ext._imp.create_builtin": _imp.create_builtin, "trl_ext._imp.create_dynamic": _imp.create_dynamic}

    def debug(flags, denied=FrameDenied):
        if type(flags) is not int or flags & save_all:
            raise denied("gc.DEBUG_SAVEALL is not available in the sandbox")
        set_debug(flags)

    def maker(event):
        def create(name, origin, made, denied=FrameDenied, genuine=makers[event], spec=_module_spec, own=_installed):
            if type(name) is not str or type(made) is not list or not (origin is None or type(origin) is str):
                raise denied("a module spec's name and origin must be a str")  # exact types: no program code runs
            for part in name.split("."):  # C looks up PyInit_<last part> up to a NUL: "gc\x00" was gc (R10bJ-6)
                if not (part.isascii() and part.isidentifier()):
                    raise denied("a module name must be ASCII identifiers joined by dots in the sandbox")
            if name.rpartition(".")[2] in ("gc", "_imp"):
                raise denied("a fresh " + name + " module is not available in the sandbox")
            if event.endswith("dynamic") and (origin is None or not own(origin)):
                raise denied("only the interpreter's own extension modules load in the sandbox")
            made.append(genuine(spec(name, origin)))

        return create

    stand_ins = {"__builtins__": {}, "audit": sys.audit}
    gc.set_debug = eval(_STAND_IN_CODES["trl_ext.gc.set_debug"], stand_ins)
    for event in makers:
        setattr(_imp, event.rpartition(".")[2], eval(_STAND_IN_CODES[event], stand_ins))
    return {"trl_ext.gc.set_debug": debug, **{event: maker(event) for event in makers}}


def _runtime_code(runtime):
    if runtime.get("tag") == sys.implementation.cache_tag + " " + sys.version:
        return marshal.loads(binascii.a2b_base64(runtime["bytecode"]))
    return compile(runtime["source"], "_harness_runtime.py", "exec")


def _main(runtime=None, confine=None):
    """``runtime``: the runtime's namespace, already loaded (a fork server); ``confine``: called before the limits
    are applied (a fork server's child confines itself there)."""
    payload_fd, ready_fd, nonce_fd = (int(a) for a in sys.argv[1:4])
    payload = _parse_json(bytes.decode(_read_frame(payload_fd)))  # the header only
    if runtime is None:
        runtime = {"__name__": "_harness_runtime", "__builtins__": __builtins__}
        if payload["mode"] != "script":
            exec(_runtime_code(payload.pop("runtime")), runtime)  # before the program exists: genuine builtins
    if confine is not None:
        confine()
    if payload["mode"] != "script":  # before "ready" (a run whose filter did not load never runs the program) and
        _no_signal_handlers()  # before the uid drops (the rlimit backend's uid may not reach the C modules then)
    _apply_limits(payload["limits"], payload["uid"])
    _note_refusals()
    _poll_where_epoll_is_refused()
    out_fd = os.dup(1)  # private copy: the program may close or redirect fd 1
    os.set_inheritable(out_fd, False)
    os.write(ready_fd, b"ready")
    os.close(ready_fd)
    sys.argv = ["solution.py"]
    if nonce_fd >= 0:
        os.close(nonce_fd)
    if payload["mode"] != "script":  # a judged mode: the harness describes the program after it ran
        runtime["_main_depth"] = _depth()  # before the audit hook refuses frames
        runtime["_program_file"], runtime["_main_module"] = _program_file, _main_module
        runtime["_frames_under_program"], runtime["_hold_modules"] = _frames_under_program, _hold_modules
        runtime["_run_main"] = _run_main
        runtime["_program_recursion_limit"] = _program_getrecursionlimit
        runtime["_undumpable"]()
        runtime["_referents"] = _deny_frames()
    if payload["mode"] == "script":
        os.close(out_fd)
        os.close(payload_fd)
        del payload_fd, ready_fd, nonce_fd, out_fd
        code = payload.pop("code")
        _frames_under_program(_depth() + 2)  # this function, those under it, _run_main, exec's entry: as python's
        path = _program_file(code)
        _hold_modules()
        _run_main(code, path, _main_module(path).__dict__)
    else:
        runtime["main"](payload, out_fd, payload_fd, _read_frame, _parse_json)


if __name__ == "__main__":
    _main()
