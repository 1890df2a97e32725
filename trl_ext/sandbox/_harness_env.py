"""The test's environment around each call of the "calls" mode, in the sandbox (``_harness_runtime._calls_child``):
``random`` seeded by the judge before the program loads, and the program's ``sys.stdout``/``sys.stderr``/``sys.stdin``
as string buffers during a call where the test has replaced its own (the judge's ``replay_env.py``). Compiled with
``_harness_values.py`` and ``_harness_runtime.py`` as one module (``base.harness_runtime_source``); same rules:
stdlib C modules only, no trl_ext import.
"""

import _io
import builtins
import sys

if False:  # never runs: compiled as one module with _harness_values.py and _harness_runtime.py
    from trl_ext.sandbox._harness_values import _int_repr, _json_str, _str_join


def _own_namespace(function):
    """``function`` over a namespace of its own (the builtins and ``sys``; the functions it makes inherit it): the
    program holds what it makes (a finder in its ``sys.meta_path``) and through ``__globals__`` reaches that
    namespace, never the runtime's, whose functions describe the program to the judge (red team R9b-1, R10J-1:
    ``__globals__`` reads are not audited)."""
    space = {"__builtins__": builtins, "sys": sys}  # the program's builtins, not the runtime's copy
    return type(_own_namespace)(function.__code__, space, function.__name__, function.__defaults__)


def _seed_on_import(seed):
    """A finder for the front of ``sys.meta_path`` that seeds ``random`` right after the program first imports it:
    a namespace object (no class: ``object.__subclasses__()`` lists every class) whose ``find_spec`` closes over
    the seed and itself."""
    finder = type(sys.implementation)()

    def find_spec(name, path=None, target=None):
        if name != "random":
            return None
        try:  # noqa: SIM105 - contextlib would cost start-up time
            sys.meta_path.remove(finder)
        except BaseException:  # noqa: B036 - the program may have replaced sys.meta_path
            pass
        for other in sys.meta_path:
            spec = other.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            module.seed(seed)

        spec.loader.exec_module = exec_module
        return spec

    finder.find_spec = find_spec
    return finder


def _seed_random(seed):
    """The judge's seed for ``random``, before the program loads: every sandbox run of one evaluation draws the
    same numbers, so a replayed call gives the result it gave in the previous run (importing ``random`` here would
    cost ~10 ms a run: it is seeded when the program imports it; a fork server has it loaded already)."""
    if seed is None:
        return
    if "random" in sys.modules:
        sys.modules["random"].seed(seed)
    else:
        sys.meta_path.insert(0, _own_namespace(_seed_on_import)(seed))


_MAX_CAPTURE = 1 << 16  # characters a call may print into a test's captured stream (the run's stdout is capped)


def _redirect(around):
    """Before a call: ``around`` (from the judge) says whether the test captures ``sys.stdout`` ("out") or
    ``sys.stderr`` ("err") and what its ``sys.stdin`` still holds ("in"); the program's streams become string
    buffers, as the test's are. None when the test changed none."""
    if not around:
        return None
    saved, buffers = (sys.stdout, sys.stderr, sys.stdin), {}
    if around.get("out"):
        buffers["out"] = sys.stdout = _io.StringIO()
    if around.get("err"):
        buffers["err"] = sys.stderr = _io.StringIO()
    if "in" in around:
        buffers["in"] = sys.stdin = _io.StringIO(around["in"])
    return saved, buffers


def _with_streams(streams, record):
    """``record`` with what the call printed and how much of the given stdin it read ("env"); "lost" when the
    program broke the buffers (its case fails)."""
    if streams is None:
        return record
    (sys.stdout, sys.stderr, sys.stdin), buffers = streams
    try:
        env = []
        for key in ("out", "err"):
            if key in buffers:  # past the cap the judge refuses the test: no text sent
                text = _io.StringIO.getvalue(buffers[key])
                env.append('"' + key + '": ' + _json_str(text) if len(text) <= _MAX_CAPTURE else '"more": true')
        if "in" in buffers:
            env.append('"in": ' + _int_repr(_io.StringIO.tell(buffers["in"])))
        return record[:-1] + ', "env": {' + _str_join(", ", env) + "}}"
    except BaseException:  # noqa: B036 - closed or replaced by the program
        return record[:-1] + ', "env": {"lost": true}}'
