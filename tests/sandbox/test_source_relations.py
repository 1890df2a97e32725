"""Class 1 (red team R8b-1): what the judge trusts of the program's classes and module names comes from the program's
SOURCE (``program_source.program_facts``, read on the trainer's side), never from the harness that runs in the
program's process after it. A program that rewrites the harness's ``_exception_chain``/``_first_builtin``/
``_shadowed_builtins`` (reached through ``sys._getframe()``) scores 0; a chain or a "kept" builtin the source does not
show is refused; right programs still pass. Through ``CodeTests`` on the assert path, with the per-run bwrap launch
and landlock's fork server (one launch each, every program in one batch)."""

from __future__ import annotations

import gc
import json
import secrets
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.sandbox.assert_path import grade_asserts
from tests.sandbox.test_test_environment import cpython_passes
from trl_ext.sandbox import Limits, judge, run_tests
from trl_ext.sandbox.base import harness_runtime_source
from trl_ext.sandbox.judge import read_entries
from trl_ext.sandbox.program_exceptions import _exception_class, shadowed_reads, source_mismatch
from trl_ext.sandbox.program_source import program_facts
from trl_ext.sandbox.replay import evaluate

FIND = """import sys as _s
def _harness_globals():
    frame = _s._getframe()
    while frame is not None:
        if '_describe' in frame.f_globals and frame.f_globals is not globals():
            return frame.f_globals
        frame = frame.f_back
"""
CHAIN = (
    FIND
    + """_g = _harness_globals()
_orig_chain, _orig_first = _g['_exception_chain'], _g['_first_builtin']
def _forged_chain(kind, tagged=False):
    if type.__dict__['__name__'].__get__(kind) != 'NegativeError':
        return _orig_chain(kind, tagged)
    n = _g['_number'](_g['_CLASSES'], kind)
    if tagged:
        return '{"t": [{"t": ["NegativeError",false,%d,{"t": ["ValueError"]},"NegativeError"]}]}' % n
    return '[["NegativeError",false,%d,["ValueError"],"NegativeError"]]' % n
_g['_exception_chain'] = _forged_chain
_g['_first_builtin'] = lambda kind: 'ValueError'
"""
)
KEPT = (
    FIND
    + """_g = _harness_globals()
_g['_shadowed_builtins'] = lambda namespace: ([], [n for n in _g['_ORIGINAL_BUILTINS'] if n[:1] != '_'])
"""
)
WRONG_CLASS = (
    "class NegativeError(Exception):\n    pass\ndef check(x):\n    if x < 0:\n        raise NegativeError('n')\n"
)
WRONG_CLASS += "    return x\n"
RIGHT_CLASS = WRONG_CLASS.replace("(Exception)", "(ValueError)")
EXCEPT_VALUE = "try:\n    check(-1)\nexcept ValueError:\n    pass\nelse:\n    raise AssertionError('no ValueError')\n"
ISSUBCLASS = "assert issubclass(NegativeError, ValueError)\n"
ISINSTANCE = "try:\n    check(-1)\nexcept Exception as e:\n    assert isinstance(e, ValueError)\n"
# right programs whose relations the source shows: mixins, a class in a class, a class made in a call
MIXINS = """class AppError(Exception):
    pass
class Errors:
    class NotFound(AppError, KeyError):
        pass
def make():
    class Late(Errors.NotFound):
        pass
    return Late
def find(k):
    raise make()(k)
NotFound = Errors.NotFound
"""
MIXINS_TEST = (
    "try:\n    find('k')\nexcept KeyError as e:\n    assert isinstance(e, AppError) and type(e).__qualname__ == "
)
MIXINS_TEST += "'make.<locals>.Late'\nassert issubclass(NotFound, AppError) and not issubclass(AppError, KeyError)"
CASES = [  # (program, test, CPython's verdict)
    (WRONG_CLASS + CHAIN, ISSUBCLASS, False),
    (WRONG_CLASS + CHAIN, EXCEPT_VALUE, False),
    (WRONG_CLASS + CHAIN, ISINSTANCE, False),
    (
        "Exception = KeyError\ndef f():\n    raise TypeError('t')\n" + KEPT,
        "try:\n    f()\nexcept Exception:\n    pass",
        False,
    ),
    ("len = lambda s: 0\ndef f(s):\n    return s[::-1]\n" + KEPT, "assert len(f('abc')) == 3", False),
    ("from math import *\ndef f(x):\n    return x\n", "assert pow(f(2), 2, 5) == 4", False),  # math's pow
    (WRONG_CLASS, ISSUBCLASS, False),
    (RIGHT_CLASS, ISSUBCLASS, True),
    (RIGHT_CLASS, EXCEPT_VALUE, True),
    (RIGHT_CLASS, ISINSTANCE, True),
    (MIXINS, MIXINS_TEST, True),
    ("from math import *\ndef f(x):\n    return sqrt(x)\n", "assert len([f(4)]) == 1 and f(4) == 2", True),
]
LAUNCHES = [("bwrap", "0"), ("landlock", "1")]


def test_the_plain_cpython_verdicts():
    assert [cpython_passes(program, test) for program, test, _ in CASES] == [passes for _, _, passes in CASES]


@pytest.mark.parametrize("launch", LAUNCHES, ids=["-".join(launch) for launch in LAUNCHES])
def test_forged_class_relations_and_kept_builtins_never_pass(launch, monkeypatch):
    sources, tests = [program for program, _, _ in CASES], [test for _, test, _ in CASES]
    scores, outcomes = grade_asserts(launch, sources, tests, monkeypatch)
    assert scores == [float(passes) for _, _, passes in CASES], list(zip(tests, scores))
    assert outcomes["code_tests/infra_error"] == 0.0
    # `pow`: refused; the forgers fail to load (the harness's audit hook denies their frame walk: FrameDenied)
    assert outcomes["code_tests/unsupported_test"] * len(CASES) >= 1


def test_the_source_decides_each_class_relation():
    source = program_facts(WRONG_CLASS + "class Owner(ValueError):\n    def __init__(self):\n        pass\n")
    assert source["classes"]["NegativeError"] == [["b:Exception"], []] and not source["dynamic"]
    assert source_mismatch(source, "NegativeError", "NegativeError", False, ["b:Exception"]) == ""
    for name, qualname, own, bases in [
        ("NegativeError", "NegativeError", False, ["b:ValueError"]),  # a base the source does not show
        ("NegativeError", "NegativeError", False, ["b:Exception", "b:ValueError"]),
        ("Owner", "Owner", False, ["b:ValueError"]),  # its __init__ denied: the test would make it itself
        ("ValueError", "NegativeError", False, ["b:Exception"]),  # a name that is not its qualname's
        ("Made", "Made", False, ["b:Exception"]),  # no class statement of that qualname
    ]:
        assert source_mismatch(source, name, qualname, own, bases), (name, bases)
    assert source_mismatch(source, "Owner", "Owner", True, ["b:ValueError"]) == ""  # "own" only adds refusals
    for program in (  # the AST cannot decide: every chain is refused
        "import sys\nclass E(Exception):\n    pass\nsys._getframe()",
        "class E(Exception):\n    pass\nE.__bases__ = (ValueError,)",
        "E = type('E', (Exception,), {})",
        "class E(Exception):\n    pass\nglobals()['E'] = ValueError",
        "class E(Exception):\n    pass\nexec('x = 1')",
        "class E(Exception):\n    pass\nx = getattr(E, name)",
        "class E(Exception):\n    pass\nmatch E:\n    case type(__bases__=b):\n        pass",  # R10J-3's spelling
        "def f(:",
    ):
        assert source_mismatch(program_facts(program), "E", "E", False, ["b:Exception"]), program
    linked = "class Node:\n    pass\nclass List:\n    def add(self, node):\n        self.tail.next = node\n"
    assert program_facts(linked + "        self.max = 0\n")["dynamic"] == ""  # an object's attributes, not a module's
    for program in ("import pydoc\npydoc.builtins.len = 3", "from sys import modules\nmodules['builtins'].len = 3"):
        assert program_facts(program)["dynamic"], program
    for program in (  # one qualname, two statements or a base that is an expression or rebound: no relation
        "class E(Exception):\n    pass\nclass E(ValueError):\n    pass",
        "Base = ValueError\nclass E(Base):\n    pass",
        "ValueError = KeyError\nclass E(ValueError):\n    pass",
        "import json\nclass E(json.JSONDecodeError):\n    pass",
        "class M(type):\n    pass\nclass E(Exception, metaclass=M):\n    pass",
    ):
        facts = program_facts(program)
        assert facts["classes"].get("E") is None or None in facts["classes"]["E"][0], program
    refused: list = []

    def refuse(why: str) -> None:
        refused.append(why)
        raise LookupError(why)

    forged = [["NegativeError", False, 0, ["ValueError"], "NegativeError"]]
    with pytest.raises(LookupError):
        _exception_class(forged, None, {"refuse": refuse, "source": source})
    with pytest.raises(LookupError):  # no reading of the source at all: refused too
        _exception_class(forged, None, {"refuse": refuse})
    honest = [["NegativeError", False, 0, ["Exception"], "NegativeError"]]
    made = _exception_class(honest, None, {"refuse": refuse, "source": source})
    assert len(refused) == 2 and issubclass(made, Exception) and not issubclass(made, ValueError)


def test_rebound_builtins_are_read_from_the_source():
    rebound = program_facts(
        "len = 1\nfor sum in []:\n    pass\ndef f(max):\n    min = 2\n    global sorted\n    sorted = 3\n"
        "class C:\n    abs = 4\nimport os as pow\nfrom math import *\n"
    )["rebound"]
    assert {"len", "sum", "sorted", "pow"} <= set(rebound) and not {"max", "min", "abs"} & set(rebound)
    assert "*" in program_facts("from not_loaded_anywhere_module import *\n")["rebound"]
    kept_forged = [[name, ["builtin"]] for name in ("len", "sorted", "abs")]
    source = program_facts("len = lambda s: 0\ndef f():\n    return 1\n")
    assert shadowed_reads("assert len(f()) and sorted([1]) and abs(1)", None, kept_forged, source) == ["len"]


def test_a_function_of_the_source_described_as_an_exception_class_is_refused():
    """The description names which test name is an exception class: where the source binds that name with a
    ``def``, the evaluation refuses (``issubclass(f, ValueError)`` would hold for the program's function)."""
    source = program_facts("class E(ValueError):\n    pass\ndef f():\n    return 1\n")
    kept = [[name, ["builtin"]] for name in ("issubclass", "ValueError")]
    chain = [["E", False, 0, ["ValueError"], "E"]]
    answers = []
    for name in ("f", "E"):
        task = {"test": f"assert issubclass({name}, ValueError)", "prefix": None, "entry_point": None}
        task.update(names=[name], modules=[], seed=1, calls=[], results=[], source=source)
        task["program"] = [[name, ["exc", chain, "ValueError", None]], *kept]
        answers.append(evaluate(task))
    assert answers[0]["verdict"] == "unsupported" and "its source does not show" in answers[0]["detail"]
    assert answers[1]["verdict"] == "passed", answers[1]


def test_each_class_body_is_read_once_whatever_its_dotted_bases(monkeypatch):
    """Red team R10J-5: a class statement with thousands of bases ``X.Y`` next to a long body of ``X`` re-walked
    that body once per base (seconds of the trainer's CPU for a 10 KB program). Each body is read once now, and
    the dotted bases still resolve."""
    import trl_ext.sandbox.program_source as program_source

    walked = []
    real = program_source._body_bindings
    monkeypatch.setattr(program_source, "_body_bindings", lambda node: walked.append(node.name) or real(node))
    body = "".join(f"    a{i} = {i}\n" for i in range(300))
    bases = ", ".join(["X.Y"] * 400)
    program = f"class X:\n{body}    class Y(Exception):\n        pass\nif 0:\n    class Z({bases}):\n        pass\n"
    facts = program_facts(program + "\n# R10J-5\n")  # a text no other test has cached
    assert sorted(walked) == ["X", "Y", "Z"]
    assert facts["classes"]["X.Y"] == [["b:Exception"], []]
    assert facts["classes"]["Z"][0] == ["c:X.Y"] * 400


def test_a_class_pattern_reads_attributes_as_an_attribute_does():
    """``case C(name=x)`` reads ``subject.name``: a name of the refused list makes the source unreadable (R10J-3
    reached ``__subclasses__`` and ``__globals__`` this way), any other keeps it readable."""
    for attribute in ("__subclasses__", "__globals__", "__dict__", "f_back"):
        program = f"match object:\n    case type({attribute}=x):\n        pass\n"
        assert attribute in program_facts(program)["dynamic"], attribute
    assert program_facts("match 3:\n    case int(real=r, imag=0):\n        pass\n")["dynamic"] == ""


def test_the_worker_gets_the_description_entries_an_evaluation_reads():
    """The judge sends the evaluation only the description's entries of the test's names and of the names the test
    (or its prefix) reads unbound (``read_entries``); the other kept builtins change no verdict: each evaluation
    answers as with the whole description (a refused shadowed builtin included), and a kept entry it reads counts."""
    kept = [[name, ["builtin"]] for name in ("abs", "all", "max", "min", "sorted", "sum")]
    described = [["f", ["fn", "f", None]], ["len", ["shadow"]], *kept]
    prefix = "def helper():\n    return abs(-1)\n"
    assert read_entries(described, "assert len(f()) == 1\nx = 1\n", prefix, ["f"]) == described[:3]
    assert read_entries(described, "assert sorted(f(", None, ["f"]) == described  # does not parse: all
    source = program_facts("len = lambda s: 0\ndef f():\n    return 1\n")
    tests = {"assert len([f()]) == 1": "unsupported", "assert sorted([f()]) == [1]": "passed"}
    tests.update({"assert max(f(), 0) == 1 and helper() == 1": "passed", "assert max(f(), 0) == 2": "failed"})
    for test, verdict in tests.items():
        answers = []
        for entries in (described, read_entries(described, test, prefix, ["f"]), described[:1]):
            task = {"test": test, "prefix": prefix, "entry_point": None, "names": ["f"], "modules": [], "seed": 1}
            task.update(calls=[["f", [], {"d": []}, []]], results=[{"ok": True, "upd": [], "value": 1, "halt": False}])
            answers.append(evaluate({**task, "source": source, "program": entries}))
        assert answers[0] == answers[1] and answers[0]["verdict"] == verdict, (test, answers)
        assert answers[2]["verdict"] == "unsupported" and "may rebind" in answers[2]["detail"]  # abs: not kept


class _SlowFinalizer:
    def __del__(self):
        time.sleep(0.0001)  # run by the collector inside whatever allocates next: this thread lets another run


def test_the_entries_are_read_in_threads_at_once():
    """The code reward grades in threads, and CPython 3.11's ast.parse is not thread-safe: a collection inside it
    that lets another thread parse raises SystemError out of the reward. ``read_entries`` parses one test at a
    time (this raised without the judge's parse lock)."""
    described = [["f", ["fn", "f", None]], ["len", ["builtin"]], ["abs", ["builtin"]]]
    body, token = "    x = [[len(y) for y in z] for z in w if z]\n" * 40, secrets.token_hex(4)  # tests not read yet

    def read(k: int) -> list:
        entries = []
        for i in range(10):
            gc.collect(0)
            for _ in range(100):
                cycle = _SlowFinalizer()
                cycle.me = cycle  # garbage once the name is bound again: collected inside the next parse
            test = f"def h_{token}_{k}_{i}(w):\n{body}assert len(f({i}))"
            entries.append(read_entries(described, test, None, ["f"]))
        return entries

    threshold = gc.get_threshold()
    gc.set_threshold(1000)
    try:
        with ThreadPoolExecutor(4) as pool:
            read_all = [entry for entries in pool.map(read, range(4)) for entry in entries]
    finally:
        gc.set_threshold(*threshold)
    assert read_all == [described[:2]] * 40


def test_the_harness_describes_only_the_builtins_the_judge_reads():
    """The run's payload lists the names whose entries the evaluation reads (the test's names and the names the test
    or its prefix reads unbound: ``judge.entry_names``), and the harness writes the builtin entries of those alone
    (~150 otherwise, which ``read_entries`` dropped): the same entries reach the evaluation, so a builtin the
    program rebinds and the test reads is still refused, and a kept one still passes."""
    harness = {"__name__": "_harness_runtime"}
    exec(compile(harness_runtime_source(), "_harness_runtime.py", "exec"), harness)
    namespace = {"__name__": "__main__", "len": lambda s: 0, "f": lambda: 1}
    whole = json.loads(harness["_describe"](namespace, ["f"]))["names"]
    listed = json.loads(harness["_describe"](namespace, ["f"], ["len", "sorted", "f", 3]))["names"]
    assert len(whole) > 100 and ["len", ["shadow"]] in whole and ["sorted", ["builtin"]] in whole
    assert listed == [["f", ["fn", "<lambda>", None]], ["len", ["shadow"]], ["sorted", ["builtin"]]]
    assert json.loads(harness["_describe"](namespace, ["f"], "len"))["names"] == whole  # no list: every builtin
    assert judge.entry_names("assert len(f(x)) == sorted([1])[0]\nx = 2", "", ("f",)) == {"len", "sorted", "f"}
    assert judge.entry_names("assert len(f(", "", ("f",)) is None  # does not parse: the harness lists every builtin

    payloads, stdouts = [], []
    get_backend = judge.get_backend

    class Recording:
        def __init__(self, backend) -> None:
            self.backend = backend

        def __getattr__(self, name: str):
            return getattr(self.backend, name)

        def launch(self, payload, *args, **kwargs):
            result = self.backend.launch(payload, *args, **kwargs)
            payloads.append(payload)
            stdouts.append(result.stdout)
            return result

    judge.get_backend = lambda name=None: Recording(get_backend(name))
    try:
        rebinds = run_tests(
            "len = lambda s: 0\ndef f():\n    return [1]\n",
            {"kind": "assert", "code": "assert len(f()) == 1"},
            limits=Limits(),
        )
        keeps = run_tests(
            "def f():\n    return [1]\n", {"kind": "assert", "code": "assert len(f()) == 1"}, limits=Limits()
        )
    finally:
        judge.get_backend = get_backend
    assert "unsupported_test" in rebinds.statuses and "may rebind len" in rebinds.detail, rebinds
    assert keeps.all_passed, keeps
    assert [payload["builtins"] for payload in payloads] == [["f", "len"], ["f", "len"]]
    for stdout in stdouts:  # the description: the test's function and the one builtin the test reads
        names = [json.loads(line[line.index("{") :]) for line in stdout.splitlines() if '{"names": ' in line]
        assert [[entry[0] for entry in record["names"]] for record in names] == [["f", "len"]], stdout
