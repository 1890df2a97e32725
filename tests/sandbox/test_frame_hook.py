"""Class 1 (red team R9b-1): in the judged modes the harness installs an audit hook before the program's first
instruction that denies (``FrameDenied``, a ValueError) every route to a frame, to every object of the process or
to raw memory: ``sys._getframe``, ``tb_frame``/``gi_frame`` reads however spelled (a ``match`` class pattern,
``string.Formatter().get_field``), ``gc.get_objects``/``get_referrers``, ``sys.settrace``, ``ctypes`` calls. So the
harness that describes the program after it cannot be rewritten by it; objects the program holds of the harness (the
``random`` seeding finder in ``sys.meta_path``, a fork server's ``__main__``) lead to no namespace of the judge's.
Right programs whose standard library asks for frames (namedtuple, typing, enum, logging) still pass. Through
``CodeTests`` on the assert path: the per-run bwrap launch and landlock's fork server, one launch each."""

from __future__ import annotations

import builtins
import importlib
import sys
import textwrap

import pytest

from tests.sandbox.assert_path import grade_asserts
from tests.sandbox.test_source_relations import CHAIN, ISSUBCLASS, WRONG_CLASS
from tests.sandbox.test_test_environment import cpython_passes
from trl_ext.sandbox.program_source import _DYNAMIC_MODULES, _DYNAMIC_NAMES, program_facts

TB = "    try:\n        raise KeyError\n    except KeyError:\n        tb = sys.exc_info()[2]\n"
ROUTES = {  # each body reads a frame (or every object, or raw memory) one way
    "getframe": "    sys._getframe()\n",
    "match_tb_frame": TB + "    match tb:\n        case object(tb_frame=frame):\n            pass\n"
    "        case _:  # a failed read (FrameDenied is an AttributeError too) is no match\n"
    "            raise ValueError('no frame')\n",
    "formatter_tb_frame": TB + "    string.Formatter().get_field('0.tb_frame', (tb,), {})\n",
    "gi_frame": "    g = (x for x in [1])\n    getattr(g, 'gi_' + 'frame')\n",
    "gc_objects": "    gc.get_objects()\n",
    "gc_referrers": "    gc.get_referrers(route)\n",
    "gc_referents": "    gc.get_referents({})\n",  # the harness's own use is allowed, the program's is not
    "settrace": "    sys.settrace(lambda *args: None)\n",
    "current_frames": "    sys._current_frames()\n",
    "audit_hook": "    seen = []\n    sys.addaudithook(lambda event, args: seen.append(event))\n"
    "    compile('1', 'x', 'eval')\n    if not seen:  # refused hooks are dropped silently\n"
    "        raise ValueError('no hook')\n",
    "ctypes_call": "    import ctypes\n    ctypes.pythonapi.PyEval_GetFrame\n",
    # what a right program loses: a traceback is formatted from its frames (docs/sandbox.md, class 1)
    "format_exc": "    import traceback\n    try:\n        1 / 0\n    except ZeroDivisionError:\n"
    "        traceback.format_exc()\n",
    "logging_exception": "    import logging\n    try:\n        1 / 0\n    except ZeroDivisionError:\n"
    "        logging.exception('failed')\n",
}
ROUTE = "import gc, string, sys\ndef route():\n    try:\n{body}    except ValueError:\n        return 'denied'\n"
ROUTE += "    return 'reached'\n"
FORGER = CHAIN.replace(  # R9b-1: the frame walk starts at a traceback's frame, read by a match class pattern
    "    frame = _s._getframe()\n",
    "    try:\n        raise KeyError\n    except KeyError:\n        tb = _s.exc_info()[2]\n"
    "    match tb:\n        case object(tb_frame=frame):\n            pass\n",
)
HOLDERS = """import sys
def runtime_reached():
    spaces = [vars(sys.modules['__main__'])]
    for finder in sys.meta_path:
        match type(finder):
            case object(find_spec=object(__globals__=space)):
                spaces.append(space)
    return [name for space in spaces for name in ('_describe', '_RUNTIME', '_exception_chain') if name in space]
"""
RIGHT = """import dataclasses, enum, logging, re, typing
from collections import namedtuple
Point = namedtuple('Point', 'x y')
T = typing.TypeVar('T')
Color = enum.Enum('Color', 'RED GREEN')
WORD = re.compile(r'[a-z]+')
@dataclasses.dataclass
class Item:
    name: str
    size: int
def sizes(text):
    logging.warning('sizes of %r', text)
    return [Item(w, len(w)).size for w in WORD.findall(text)]
def point_sum(a, b):
    return Point(a, b).x + Point(a, b).y + Color.GREEN.value
"""
RIGHT_TESTS = ["assert sizes('ab cde') == [2, 3]", "assert len(sizes('ab cde')) == 2", "assert point_sum(1, 2) == 5"]
# R9b-3: a call changes what the judge read once the module ran (a class's bases, a builtin name of the module)
BASES_IN_CALL = """import functools
class _Plain(Exception):
    pass
class NegativeError(ValueError):
    pass
def setup():
    functools.update_wrapper(NegativeError, _Plain, assigned=('__ba' + 'ses__',), updated=())
    return True
"""
LEN_IN_CALL = "def f(s):\n    match f:\n        case object(__globals__=G):\n            G['len'] = lambda s: 0\n"
LEN_IN_CALL += "    return s[::-1]\n"
GLOBAL_MAX = "max = 0\ndef track(x):\n    global max\n    max = x if x > max else max\n    return max\n"
JUDGED = [(FORGER + WRONG_CLASS, ISSUBCLASS, False)] + [(RIGHT, test, True) for test in RIGHT_TESTS]
JUDGED += [
    (BASES_IN_CALL, "assert setup()\nassert issubclass(NegativeError, ValueError)", False),
    (LEN_IN_CALL, "assert f('abc') == 'cba'\nassert len(f('abc')) == 3", False),
    (GLOBAL_MAX, "assert track(3) == 3 and track(1) == 3", True),  # bound at load: not a builtin the test reads
]
LAUNCHES = [("bwrap", "0"), ("landlock", "1")]


def test_the_plain_cpython_verdicts():
    assert [cpython_passes(program, test) for program, test, _ in JUDGED] == [passes for _, _, passes in JUDGED]
    reached = [
        cpython_passes(ROUTE.format(body=textwrap.indent(body, "    ")), "assert route() == 'reached'")
        for body in ROUTES.values()
    ]
    assert reached == [True] * len(ROUTES)


@pytest.mark.parametrize("launch", LAUNCHES, ids=["-".join(launch) for launch in LAUNCHES])
def test_frames_are_denied_and_right_programs_pass(launch, monkeypatch):
    sources = [ROUTE.format(body=textwrap.indent(body, "    ")) for body in ROUTES.values()] + [HOLDERS]
    tests = ["assert route() == 'denied'"] * len(ROUTES) + ["assert runtime_reached() == []"]
    sources += [program for program, _, _ in JUDGED]
    tests += [test for _, test, _ in JUDGED]
    scores, outcomes = grade_asserts(launch, sources, tests, monkeypatch)
    expected = [1.0] * (len(ROUTES) + 1) + [float(passes) for _, _, passes in JUDGED]
    assert scores == expected, list(zip(list(ROUTES) + ["holders"] + [t for _, t, _ in JUDGED], scores))
    assert outcomes["code_tests/infra_error"] == 0.0


def test_a_standard_module_function_named_like_a_dynamic_builtin_leaves_the_source_readable():
    assert program_facts("import re\nWORD = re.compile('a')\n")["dynamic"] == ""
    assert program_facts("import re as r\nWORD = r.compile('a')\n")["dynamic"] == ""
    for still in (  # the builtins module, a name bound again, a dunder: still unreadable
        "import builtins as re\nre.exec('x = 1')\n",
        "import re\ndef f(re):\n    re.exec('x = 1')\n",
        "import re\nre.__builtins__\n",
        "import re\nre = print.__self__ if False else re\nre.exec('x = 1')\n",
    ):
        assert program_facts(still)["dynamic"] != "", still


def test_no_standard_module_holds_a_dynamic_builtin_under_its_name():
    """What ``program_source._standard_modules`` relies on: ``M.compile`` of a standard module M is M's own."""
    originals = {id(getattr(builtins, name)) for name in _DYNAMIC_NAMES if hasattr(builtins, name)}
    loaded = [name for name in sys.stdlib_module_names if name in sys.modules and name not in _DYNAMIC_MODULES]
    for name in loaded + ["re", "ast", "os", "operator", "functools"]:
        module = importlib.import_module(name)
        held = [n for n in _DYNAMIC_NAMES if id(getattr(module, n, None)) in originals]
        assert held == [], (name, held)
