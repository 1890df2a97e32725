"""Class 2: nothing a program prints, returns or forges raises out of the judge. Every decode and comparison is
total (bounded depth, size and element count, no quadratic path); a value that fails to decode fails its case
and is counted as the "invalid_result" outcome."""

from __future__ import annotations

import collections
import functools
import json
import random
import time
from array import array
from fractions import Fraction

import pytest

from trl_ext.rewards import CodeTests
from trl_ext.sandbox import Backend, RunResult, compare_stdio, plain_data, run_tests, values_equal
from trl_ext.sandbox.live import LiveObjects, iterator_class
from trl_ext.sandbox.program_source import program_facts
from trl_ext.sandbox.records import RecordStream, _described_names
from trl_ext.sandbox.replay import _program_exception, decode, decode_record, exception_details

PRIME = 2**61 - 1  # ints that are multiples of it all hash to 0
BIG_INTS = (10**309, -(10**400), 10**1000)
HEX_INTS = ("f", "f" * 3000, "f" * 300_000)
COLLIDING = tuple([PRIME * k for k in range(n)] for n in (3, 66, 400))
BOUND_S = 2.0  # generous per-program time bound (a program's whole output parsed, decoded and compared)


def _value(rng: random.Random, depth: int = 0):
    """A random tagged-JSON value: valid plain data, hostile shapes (huge ints, deep nesting, hash-colliding sets
    and dict keys) and malformed tags (wrong inner types, unknown tags, wrong arity)."""
    leaves = [
        lambda: rng.randint(-(2**70), 2**70),
        lambda: rng.choice(BIG_INTS),
        lambda: rng.choice([0.5, -0.0, 1e308, 5e-324, 1e18]),
        lambda: "".join(rng.choice('ab\u00e9\U0001f600\\"\n') for _ in range(rng.randint(0, 8))),
        lambda: rng.choice([True, False, None]),
        lambda: {"i": rng.choice(HEX_INTS)},
        lambda: {"f": rng.choice(["nan", "inf", "-inf", "NaN", 1])},
        lambda: {"s": rng.choice(COLLIDING)},
        lambda: {"d": [[k, 1] for k in rng.choice(COLLIDING)]},
        lambda: {"q": [rng.randint(-9, 9), rng.choice([0, -1, 3, "x", 10**500])]},
        lambda: {"r": [0, rng.choice([10**100, 5, "x"]), rng.choice([0, 1, -1])]},
        lambda: {"nt": [rng.choice(["P", "class", "_x", 1]), rng.choice([["a"], ["a", "a"], "a"]), [1]]},
        lambda: {"dd": [rng.choice(["int", "eval", None, 3]), [[1, 2]]]},
        lambda: {"dq": [[1, 2], rng.choice([None, -1, 2, "x"])]},
        lambda: {"c": [rng.choice([1.0, 1, "x"]), 2.0]},
        lambda: {"b": rng.choice(["AA==", "@@", 1])},
        lambda: {rng.choice(["t", "s", "fs", "C", "od", "g", "zz"]): rng.choice([1, "x", None, {}])},
        lambda: {"t": [1], "s": [2]},
        # the tags of views, Decimal, arrays, identity ("a", "o", "nan") and defaultdict values
        lambda: {rng.choice(["dk", "dv", "di"]): rng.choice([[1, 2], [[1, 2]], COLLIDING[1], [[[1], 2]], "x"])},
        lambda: {"dec": rng.choice(["0.5", "-Infinity", "NaN", "sNaN", "1e999999999999", "x", 1, "9" * 300_000])},
        lambda: {
            rng.choice(["ar", "mv"]): [rng.choice(["i", "B", "d", "u", "x", 1]), rng.choice([[1, 2], [2**70], ["a"]])]
        },
        lambda: {"o": [rng.choice([0, -1, 10**30, "0"]), rng.choice([[1], {"d": [[1, 2]]}, {"s": [1]}, {"a": 0}])]},
        lambda: {"a": rng.choice([0, 1, 2, 3, -1, 10**30, "0", True, None, [0]])},  # a reference, maybe to nothing
        lambda: {"nan": rng.choice([0, 1, -1, 2**40, "0", None])},
        lambda: {"nan": [rng.choice([0, -1, 2**40]), rng.choice(["7ff8000000000001", "7ff0000000000000", "zz", 1])]},
        lambda: {rng.choice(["nb", "u"]): rng.choice(["fff8000000000000", "3ff0000000000000", "x" * 16, [1], None])},
        lambda: {
            "sub": [
                rng.choice([[0, "S", "S", True], [0, "S", "S"], [-1, "S", "S", False], ["0", "", "S", True]]),
                rng.choice([["'a'", "a", None], ["a", 1, None], [], "x"]),
                rng.choice(["a", 5, [1], None, {"t": [1]}, {"f": "inf"}]),
            ]
        },
        lambda: {"dd": [rng.choice([{"v": 0}, {"v": {"zz": 1}}, {"x": 0}, {"v": [1]}]), [[1, 2]]]},
        lambda: {rng.choice(["ba", "E"]): rng.choice(["AA==", "...", "@@", 1])},
        lambda: {"s": [[1], [2]]},  # unhashable elements
        lambda: {"u": rng.choice([["a", 0xD83D, 0xDE00], [], [0x110000], [-1], ["a", 1.5], "ab", [["a"]], [True]])},
        # sets in the program's order, with its table size; namedtuples with their class number and module
        lambda: {
            rng.choice(["S", "FS"]): [
                rng.choice([8, 16, 512, 1 << 16, 1 << 40, -1, "x"]),
                rng.choice([[1, 2], [2, 9], [9, 2], COLLIDING[1], [1, 1.0], [[1]], "x"]),
            ]
        },
        lambda: {rng.choice(["S", "FS"]): rng.choice([[8], [8, [1], 3], "x", [[1], [2]]])},
        lambda: {
            "nt": [
                rng.choice(["P", "if", "_P"]),
                rng.choice([["a"], ["_a"], ["a", "a"], [1]]),
                [1],
                rng.choice([0, 1, -1, "0", 10**30]),
                rng.choice(["__main__", None, 5, "m" * 300]),
            ]
        },
        lambda: {rng.choice(["gc", "gen", "g"]): _iterator_classes(rng)},  # a program's iterator: its classes, forged
    ]
    if depth > 3 or rng.random() < 0.4:
        return rng.choice(leaves)()
    containers = [
        lambda: [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))],
        lambda: {rng.choice(["t", "s", "fs", "g"]): [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]},
        lambda: {rng.choice(["d", "C", "od"]): [[_value(rng, depth + 1), _value(rng, depth + 1)]]},
    ]
    return rng.choice(containers)()


def _iterator_classes(rng: random.Random) -> object:
    """What an iterator's record holds: its classes [[name, qualname, module, number(, bases, own)], ...],
    well-formed or not."""
    number = lambda: rng.choice([0, 3, 1 << 19, None, -1, 1 << 20, 10**30, "3", True, 2.0])  # noqa: E731
    text = lambda: rng.choice(["C", "map", "f.<locals>.C", "", "x" * 201, "a\0b", "\ud800", 5, None])  # noqa: E731
    bases = lambda: rng.choice([["object"], [None], [3], [number()], [], "object"])  # noqa: E731
    numbered = lambda: [text(), text(), text(), number(), bases(), rng.choice([False, True, 1])]  # noqa: E731
    entry = lambda: rng.choice([[text(), text(), text(), number()], numbered(), [text(), number()], "C", None])  # noqa: E731
    return rng.choice([[entry() for _ in range(rng.choice([0, 1, 2, 3, 17]))], None, 3, "C"])


_SOURCE = program_facts("class C:\n    pass\n")  # what the program's source says of its classes (R8b-1)


def _made_iterator(made: list, classes: list | None) -> object:
    """An evaluation's iterator maker (``replay._Session._iterator``), its classes cached in ``made[0]``."""
    table = made[0].setdefault("table", {"refuse": _refuse, "source": _SOURCE})  # refused past what is built
    iterator = iterator_class(classes, made[0], table)(lambda number: None, len(made), lambda *args: None)
    made.append(iterator)
    return iterator


def _iterator_of(live: LiveObjects, steps: tuple, number: int, classes: list | None) -> object:
    return live.iterator(number, classes, *steps, {"refuse": _refuse, "source": _SOURCE})


def _refuse(why: str) -> None:
    raise _Refused(why)


def _updates(rng: random.Random) -> object:
    """A record's updates of numbered objects ("upd": [number, contents] pairs), well-formed or not."""
    forms = [lambda: [_value(rng)], lambda: {"d": [[1, _value(rng)]]}, lambda: {"s": [_value(rng)]}, lambda: "x"]
    forms += [lambda: {"dq": [[_value(rng)], rng.choice([None, 1, -1])]}, lambda: {"ba": rng.choice(["eA==", 1])}]
    forms += [lambda: {"C": [[_value(rng), 1]]}, lambda: {"ar": ["i", [rng.choice([1, 2**70, "x"])]]}]
    number = lambda: rng.choice([0, 1, 2, 3, 4, 5, 6, 7, -1, 10**30, "0", None])  # noqa: E731
    entry = lambda: rng.choice([[number(), rng.choice(forms)()], [number()], rng.choice(forms)()])  # noqa: E731
    return rng.choice([[entry() for _ in range(rng.randint(0, 3))], "x", None, {"d": []}])


def _deep(depth: int, tagged: bool) -> str:
    return ('{"t": [' * depth + "]}" * depth) if tagged else ("[" * depth + "]" * depth)


def _record_text(rng: random.Random, index: int, mode: str) -> str:
    """One record as the harness might write it, or forged, garbled or truncated."""
    if rng.random() < 0.1:
        return _deep(rng.choice([50, 101, 5000, 100_000]), rng.random() < 0.5)
    record = {"i": rng.choice([index] * 6 + [-1, index + 1, 10**30, True, "0", 0.0, None])}
    if mode == "calls":
        record["ok"] = rng.choice([True] * 6 + [False, 1, "true", None])
        if record["ok"] is True or rng.random() < 0.2:
            record["value"] = _value(rng)
        else:
            record[rng.choice(["raised", "unencodable", "x"])] = rng.choice(["ValueError", True, ["x"], "a b"])
            if rng.random() < 0.3:
                record["exc"] = rng.choice([["bad"], "bad", _value(rng), [10**400]])
            if rng.random() < 0.3:  # a program exception class's chain, builtin attributes
                record.update(_exception_fields(rng))
        if rng.random() < 0.2:
            record["upd"] = _updates(rng)
    else:
        record["status"] = rng.choice(["ok", "ok", "timeout", "memory", "passed", 1, ["ok"]])
        record["out"] = rng.choice(["MQ==", "", "@@", 5, "QQ==" * 10_000])
    if rng.random() < 0.1:
        record[rng.choice(["extra", "i2"])] = 1
    text = json.dumps(record)
    if rng.random() < 0.1:
        text = text[: rng.randint(0, len(text))]
    if rng.random() < 0.05:
        text = "".join(rng.choice('{}[]",:0123456789aeflnrstu\\') for _ in range(rng.randint(1, 200)))
    return text


def _exception_fields(rng: random.Random) -> dict:
    chains = ([["E", False, 0]], [["E", True, 1], ["Base", False, 0]], [["E", 1, 0]], [["a b", False, 0]], [["E"]])
    chains += ("E", [], [[]], [["E", False]], [["E", False, 0], ["E", False, 0]], [["E", True, 0], ["E", False, 1]])
    chains += tuple([["E", False, n]] for n in (-1, 1 << 20, 10**30, "0", True, 0.0, None))  # forged class numbers
    # [name, own, number, bases]: exact bases (red team round 7), and forged or garbled bases lists
    chains += ([["E", False, 0, ["ValueError"]]], [["N", False, 2, [1, "KeyError"]], ["A", True, 1, ["Exception"]]])
    chains += ([["E", False, 0, [None]]], [["E", False, 0, ["object", "TypeError"]]], [["E", False, 0, [0]]])
    chains += ([["E", False, 0, [1]], ["B", False, 1, [0]]], [["E", False, 0, [7]]], [["E", False, 0, []]])
    chains += ([["E", False, 0, [["x"]]]], [["E", False, 0, "ValueError"]], [["E", False, 0, [1.5, {"a": 1}]]])
    chains += ([["E", False, 0, ["NoSuch"]]], [["E", False, 0, ["ValueError"] * 17]], [["E", False, 0, [True]]])
    attrs = ({"d": [["name", "x"]]}, {"d": [["obj", _value(rng)]]}, {"d": [["__str__", 5]]}, {"d": [["zz", 1]]})
    attrs += ({"d": [["filename", "f"], ["filename2", {"a": 0}]]}, [1], {"d": [["__str__", "s"]]}, _value(rng))
    nested = (
        {"t": ["KeyError", ["k"], None, {"d": []}]},
        {"t": ["E", [], {"t": [{"t": ["E", False, 0]}]}, {"d": []}]},
    )
    nested += ({"t": ["E", [], {"t": [{"t": ["E", False]}]}, {"d": []}]},)
    nested += tuple({"t": ["E", [], {"t": [{"t": ["E", False, n]}]}, {"d": []}]} for n in (1, -1, 10**30, "1"))
    tagged = ({"t": ["ValueError"]}, {"t": [None]}, {"t": [0]}, {"t": [{"t": [1]}]}, ["ValueError"], {"t": []})
    nested += tuple({"t": ["E", [], {"t": [{"t": ["E", False, 0, b]}]}, {"d": []}]} for b in tagged)
    nested += ({"t": ["E", [], 5, {"d": []}]}, {"t": ["E", [], {"t": [1]}, {"d": []}]}, {"t": ["E", [1]]}, "x", 3)
    nested += ({"t": ["E", None, None, {"d": [["__str__", 1]]}]}, {"t": ["V", [], None, {"d": [["zz", 1]]}]})
    attrs += tuple({"d": [[rng.choice(["__cause__", "__context__"]), n]]} for n in nested)
    attrs += ({"d": [["__context__", "__cause__"], ["__suppress_context__", rng.choice([True, 1])]]},)
    stored = ({"t": [{"t": ["code", 7]}]}, {"t": [{"t": [1, 7]}]}, {"t": [{"t": ["_x", 7]}]}, {"t": [5]}, [["a", 1]])
    attrs += tuple({"d": [["__dict__", value]]} for value in stored)
    fields = {"cls": rng.choice(chains), "attrs": rng.choice(attrs)}
    return {k: v for k, v in fields.items() if rng.random() < 0.7}


def _description(rng: random.Random) -> dict:
    entries = (["f", ["fn", "f", "doc"]], ["f", ["fn", "f", None]], ["f", ["fn", "a b", 1]], ["E", ["exc", [["E", False, 0]],
               "ValueError", None]], ["E", ["exc", [["E", True, 1]], "NoSuchError", None]], ["E", ["exc", [["E", True, 0]], ["x"], None]], ["E", ["exc", [], "ValueError",
               "d"]], ["1", ["fn", "f", None]], ["f", ["fn"]], ["f", []], ["f", "x"], [], "x", ["E", ["exc", [["E",
               False, 2]], "KeyError", "x" * 200_000]], ["E", ["exc", [["E", False]], "ValueError", None]], ["E", ["exc",
               [["E", False, -1]], "ValueError", None]], ["E", ["exc", [["E", False, 10**30]], "ValueError", None]],
               ["E", ["exc", [["E", False, 0, ["ValueError"]]], "ValueError", None]], ["E", ["exc", [["E", False, 0,
               [1, "KeyError"]], ["A", False, 1, ["Exception"]]], "KeyError", "d"]], ["E", ["exc", [["E", False, 0,
               [0]]], "ValueError", None]], ["E", ["exc", [["E", False, 0, [None]]], "ValueError", None]])  # fmt: skip
    return {"names": [rng.choice(entries) for _ in range(rng.randint(0, 4))]} if rng.random() < 0.9 else {"x": 1}


class StubBackend(Backend):
    """Answers every run with the stdout the fuzzer wrote for it (no sandbox: the judge alone is under test)."""

    name = "stub"
    kill_all_safe = False

    def __init__(self) -> None:
        self.lines: list[str] = []

    def launch(self, payload, stdin, limits, nonce=None, progress=None):
        marker = payload.get("marker", "")
        stdout = "".join(f"\n{marker}{line}\n" for line in self.lines)
        if progress is not None and progress.stop is not None:
            progress.stop(stdout.encode())
        return RunResult("ok", stdout, "", 0, 0.0)


def test_fuzzed_records_and_values_never_raise_and_stay_within_a_time_bound():
    rng, stub = random.Random(20), StubBackend()
    n_cases, programs, records, slowest = 4, 0, 0, 0.0
    call = {"kind": "call", "fn_name": "f", "cases": [{"args": [k], "expected": 0.5} for k in range(n_cases)]}
    exact = {**call, "cases": [{"args": [k], "expected": {"1": [1, 2.0]}} for k in range(n_cases)]}
    stdio = {"kind": "stdio", "cases": [{"input": "", "output": "1.0 2"} for _ in range(n_cases)]}
    while records < 10_000:
        mode = rng.choice(["calls", "stdio"])
        stub.lines = [_record_text(rng, k, mode) for k in range(rng.randint(1, n_cases + 2))]
        records += len(stub.lines)
        start = time.perf_counter()
        if mode == "calls":
            for spec, tol in ((call, None), (call, 1e-6), (exact, None)):
                report = run_tests(
                    "def f(x): pass", spec, backend=stub, stop_on_failure=rng.random() < 0.5, float_tol=tol
                )
                assert 0 <= report.passed <= report.total and not report.infra_error
        else:
            report = run_tests("pass", stdio, backend=stub, stop_on_failure=False, float_tol=rng.choice([None, 1e-3]))
            assert 0 <= report.passed <= report.total and not report.infra_error
        slowest = max(slowest, time.perf_counter() - start)
        programs += 1
    assert slowest < BOUND_S, f"slowest program took {slowest:.2f} s"
    assert programs >= 2000


class _Refused(BaseException):
    """The evaluation's refusal (``replay._Session.refuse`` unwinds with a BaseException too)."""


def test_fuzzed_descriptions_and_exception_details_stay_total():
    """The program's description (the test's names: functions, exception classes) and a raised exception's
    program classes and attributes: checked totally (None or ValueError), and an exception is always made, or the
    test refused where it cannot be made as the program made it (the evaluation's refusal, never another error)."""
    rng, refused = random.Random(22), []

    def refuse(why: str) -> None:
        refused.append(why)
        raise _Refused

    for _ in range(10_000):
        record = {
            "ok": False,
            "raised": rng.choice(["ValueError", "KeyError", "OSError", "Nope", "UnicodeDecodeError"]),
        }
        record.update(_exception_fields(rng), exc=rng.choice([["x"], [2, "msg"], [], _value(rng)]))
        memo = {"nans": {}, "objects": {}, "classes": {}}
        try:
            args = decode_record(record, memo)
            details = exception_details(record, memo)
        except ValueError:
            continue
        try:
            made = _program_exception(record["raised"], "f", args, details, {"refuse": refuse})
        except _Refused:
            continue
        assert isinstance(made, BaseException) and isinstance(str(made), str)
        names = _described_names(_description(rng))
        assert names is None or all(type(entry[1]) is list for entry in names)
    assert 0 < len(refused) < 10_000 and all(type(why) is str for why in refused)
    stream = RecordStream("@@m@@", "calls", 1, described=True)
    stream.feed('\n@@m@@{"names": [["f", ["fn", "f", "doc"]]]}\n@@m@@{"names": []}\n')
    assert stream.names == [["f", ["fn", "f", "doc"]]] and stream.invalid  # a second description is a forgery
    stream = RecordStream("@@m@@", "calls", 1)
    stream.feed('\n@@m@@{"names": []}\n')
    assert stream.names is None and stream.invalid  # only a run that asked for one may carry a description


def test_fuzzed_values_decode_or_fail_cleanly_and_compare_totally():
    rng, failures = random.Random(9), 0
    for _ in range(3_000):  # on top of the 10,000 records above, which carry such values too
        raw = _value(rng)
        start = time.perf_counter()
        try:
            value = decode(json.loads(json.dumps(raw)))
        except ValueError:
            failures += 1
            continue
        for expected in (0.5, 10**400, [1, 2.0], {"1": 2}, "x", None, float("nan")):
            for tol in (None, 1e-9, 0.5):
                assert values_equal(value, expected, tol) in (True, False)
        assert time.perf_counter() - start < BOUND_S
    assert 0 < failures < 3_000  # both paths were exercised


def test_stdio_comparison_is_total_on_hostile_outputs():
    for output in ("9" * 200_000, "1e999 -1e999 nan", "\x00\ud800" * 1000, "1\n" * 200_000, "0x10 1_0 ∞"):
        for tol in (None, 1e-6):
            start = time.perf_counter()
            assert compare_stdio(output, "1e999 2", tol) in (True, False)
            assert time.perf_counter() - start < BOUND_S


def test_the_comparison_of_numbers_never_overflows():
    assert values_equal(10**400, 1.0, 1e-9) is False
    assert values_equal(2 * 10**308, 1.7e308, 0.5) is True  # beyond floats: exact arithmetic, relative tolerance
    assert values_equal(10**400, float("inf"), 1e-3) is False
    assert values_equal(-(10**400), 1e308, 0.5) is False
    assert values_equal(decode({"q": [10**400, 3]}), 1e300, 1e-9) is False


HOSTILE_RESULTS = {
    "huge int for a float": "def f(x):\n    return 10**400\n",
    "deep nesting": "def f(x):\n    v = []\n    for _ in range(5000):\n        v = [v]\n    return v\n",
    "nested just inside the bound": "def f(x):\n    v = 0.5\n    for _ in range(99):\n        v = [v]\n    return v\n",
    "hash-colliding set": f"def f(x):\n    return {{{PRIME} * k for k in range(2000)}}\n",
    "hash-colliding dict": f"def f(x):\n    return {{{PRIME} * k: k for k in range(2000)}}\n",
    "huge hex int": "def f(x):\n    return 16 ** 300000\n",
    "recursive list": "def f(x):\n    v = []\n    v.append(v)\n    return v\n",
    "unencodable object": "def f(x):\n    return object()\n",
}


def test_hostile_results_score_zero_with_a_logged_outcome(backend):
    spec = {"kind": "call", "fn_name": "f", "cases": [{"args": [1], "expected": 0.5}]}
    logged: dict[str, float] = {}
    reward = CodeTests(timeout_s=5.0, float_tol=1e-6)
    programs = list(HOSTILE_RESULTS.values())
    scores = reward([f"```python\n{p}\n```" for p in programs], tests=[spec] * len(programs),
                    log_metric=lambda key, value: logged.__setitem__(key, value))  # fmt: skip
    assert scores == [0.0] * len(programs)
    # refused by the decoder: the colliding set and dict, and the int of over a million bits
    assert logged["code_tests/invalid_result"] == pytest.approx(3 / len(programs))
    assert logged["code_tests/infra_error"] == 0.0
    assert_spec = {"kind": "assert", "code": "assert f(1) == 0.5\n"}
    scores = reward([f"```python\n{p}\n```" for p in programs], tests=[assert_spec] * len(programs))
    assert scores == [0.0] * len(programs)


def test_the_decoder_bounds_depth_elements_and_big_ints():
    too_many = (1 << 20) + 1
    for hostile in (
        [0] * too_many,
        {"t": [0] * too_many},
        {"d": [[k, 0] for k in range(too_many)]},
        {"i": "f" * ((1 << 18) + 1)},
        json.loads(_deep(150, True)),
        json.loads(_deep(150, False)),
        {"s": [PRIME * k for k in range(66)]},
    ):
        with pytest.raises(ValueError):
            decode(hostile)
    assert len(decode([0] * (1 << 20))) == 1 << 20 and len(decode({"s": [PRIME * k for k in range(64)]})) == 64


def test_namedtuples_are_real_classes_in_an_evaluation_and_bounded_everywhere():
    """28,000 tuple types named apart once cost ~5 s of trainer CPU (a class built per name): checking a record's
    shape builds no class (a tuple), and an evaluation builds one real namedtuple class per class number of the
    run, at most 64 (each ~0.1 ms), refusing more, a number reused with another shape and invalid names."""
    value = [{"nt": [f"N{i}", ["a", "b"], [i, {"t": [i]}], i, "__main__"]} for i in range(28_000)]
    started = time.process_time()
    decoded = decode(value)
    assert time.process_time() - started < 1.5  # generous: ~0.1 s here
    assert type(decoded[7]) is tuple and decoded[7] == (7, (7,))
    memo = {"classes": {}}
    made = decode(value[:64] + [{"nt": ["N3", ["a", "b"], [0, 1], 3, "__main__"]}], 0, memo)
    point = collections.namedtuple("N7", "a b")
    assert made[7] == point(7, (7,)) and made[7].b == (7,) and hash(made[7]) == hash((7, (7,)))
    assert repr(made[7]) == "N7(a=7, b=(7,))" and made[7]._fields == ("a", "b") and type(made[64]) is type(made[3])
    started = time.process_time()
    with pytest.raises(ValueError):
        decode(value[:65], 0, {"classes": {}})
    fields = [f"f{i}" for i in range(10_000)]
    for hostile in (
        {"nt": ["P", ["a"], [1, 2], 0, None]},
        {"nt": ["P", ["a b"], [1], 0, None]},
        {"nt": ["1P", ["a"], [1], 0, None]},
        {"nt": ["class", ["a"], [1], 0, None]},
        {"nt": ["P", ["_a"], [1], 0, None]},
        {"nt": ["P", ["a", "a"], [1, 2], 0, None]},
        {"nt": ["P", ["if"], [1], 0, None]},
        {"nt": ["P", fields, list(range(10_000)), 0, None]},
        {"nt": ["P", ["a"], [1], -1, None]},
        {"nt": ["P", ["a"], [1], 0, 5]},
        [{"nt": ["P", ["a"], [1], 0, None]}, {"nt": ["Q", ["a"], [1], 0, None]}],  # one class, two shapes
    ):
        with pytest.raises(ValueError):
            decode(hostile, 0, {"classes": {}})
    assert time.process_time() - started < 1.5


def test_sets_keep_the_programs_order_within_a_bound():
    """A set decodes to one iterating in the order it was sent (a real set where a table takes it, else the
    program-order set); presizing tables costs a bounded number of placeholder entries per record."""
    for items in ([2, 9], [9, 2], [PRIME * k for k in range(40)], [f"w{i}" for i in range(50)][::-1]):
        for slots in (8, 64, 1 << 16):
            made = decode({"S": [slots, items]}, 0, {"classes": {}})
            assert list(made) == items and made == set(items) and isinstance(made, set)
            frozen = decode({"FS": [slots, items]})
            assert list(frozen) == items and hash(frozen) == hash(frozenset(items))
    assert type(decode({"S": [512, [2, 9]]})) is set  # a real set: a table of the program's size takes the order
    made = decode({"S": [8, [2, 9]]})
    assert made.pop() == 2 and made.pop() == 9 and not made and repr(made) == "set()"
    hostile = [{"S": [1 << 16, [i, i + 1]]} for i in range(2000)]  # each would presize a 65,536-entry table
    started = time.process_time()
    assert len(decode(hostile)) == 2000
    assert time.process_time() - started < 1.5  # the placeholder budget: ~16 tables, then program-order sets
    for bad in ({"S": [8, [1, 1.0]]}, {"S": [8, [1, True]]}, {"FS": [8, [[1]]]}, {"S": [8]}, {"S": ["8", []]}):
        with pytest.raises(ValueError):
            decode(bad)


def _run_objects() -> list:
    """An assert test's numbered objects, one of each mutable type (and an iterator of the program)."""
    return [[1], {"a": 1}, {1}, collections.deque([1]), bytearray(b"x"), collections.Counter(a=1), array("i", [1])]


def test_fuzzed_records_decode_totally_with_an_evaluations_memo():
    """The assert-test path decodes a whole record against the run's numbered objects (updated in place by "upd",
    named by "a" references, iterators by their classes, forged too), or as a shape check ("loose"): still only ValueError,
    whatever the record; an update never swaps an object's type, and a malformed record changes nothing."""
    rng, iterators = random.Random(21), [{}]
    for _ in range(10_000):
        objects = _run_objects()
        record = {"ok": rng.random() < 0.5, "value": _value(rng), "raised": "ValueError", "exc": [_value(rng)]}
        if rng.random() < 0.3:
            iterator = rng.choice(
                [
                    {"gc": [["C", "C", "__main__", 3, ["object"], False]]},
                    {"gen": None},
                    {"gc": 7},
                    {"g": 7},
                    {"gen": 0},
                ]
            )
            record["value"] = [iterator, {"a": rng.choice([0, 6, 7, 99])}]
            view = rng.choice(["dk", "dv", "di", "x", 1])  # a view of a live dict: the run's, a new one, or none
            record["value"].append({"lv": [view, rng.choice([{"a": 1}, {"a": 5}, {"d": [[1, 2]]}, [1], {"a": 99}])]})
        if rng.random() < 0.9:
            fitting = [[0, [_value(rng)]], [1, {"d": [[1, _value(rng)]]}], [2, {"s": [1]}], [4, {"ba": ""}]]
            fitting += [[3, {"dq": [[_value(rng)], None]}], [5, {"C": [["b", 2]]}], [6, {"ar": ["i", [2]]}]]
            record["upd"] = rng.choice([_updates(rng), rng.sample(fitting, rng.randint(1, len(fitting)))])
        loose = rng.random() < 0.2  # the record stream's shape check, without the run's objects
        memo = {"nans": {}, "refs": objects, "live": lambda number, classes: _made_iterator(iterators, classes)}
        memo = {"loose": True} if loose else memo
        try:
            decode_record(record, memo)
        except ValueError:
            assert objects[:7] == _run_objects()
        except _Refused:  # a class the judge cannot rebuild: the evaluation's refusal
            pass
        assert [type(o) for o in objects[:7]] == [type(o) for o in _run_objects()]
    assert len(iterators) > 100  # well-formed iterators reached the evaluation's iterator maker
    assert {type(i).__name__ for i in iterators[1:]} >= {"C", "generator"} and len(iterators[0]) <= 65


def test_fuzzed_records_through_the_live_record_stream_and_the_runs_objects():
    """An assert test's records: the record stream's shape check ("live") and ``LiveObjects.apply`` on the run's
    objects never raise anything but ValueError (apply) or nothing at all (the stream); a malformed record leaves
    the run's numbering and objects as they were."""
    rng, steps = random.Random(22), (lambda number: None, lambda *args: None)
    for _ in range(3_000):
        stream = RecordStream("@@m@@", "live", 3)
        stream.feed("".join(f"\n@@m@@{_record_text(rng, k, 'calls')}\n" for k in range(rng.randint(1, 4))))
        assert all(type(record) is dict for record in stream.records)
    for _ in range(3_000):
        live = LiveObjects()
        apply_ok = {"ok": True, "upd": [], "value": [[1], {"d": [[1, {"s": [2]}]]}, {"dq": [[], None]}]}
        live.apply(apply_ok, [], {"nans": {}, "live": None})
        before = repr(live.graph[1])
        assert len(live.graph[0]) == 5  # the lists, the dict, the set and the deque (numbered after its items)
        record = {"ok": True, "value": _value(rng), "upd": rng.choice([_updates(rng), [[rng.randint(0, 4), [1]]]])}
        try:
            live.apply(record, [], {"nans": {}, "live": functools.partial(_iterator_of, live, steps)})
        except ValueError:
            assert repr(live.graph[1]) == before and len(live.graph[0]) == 5 and len(live.snaps) == 5
        except _Refused:  # a class the judge cannot rebuild: the evaluation's refusal ends it
            pass


def test_records_keep_the_identity_of_the_runs_objects():
    inner, table = [2, 1], {"k": 0}
    refs = [inner, table]
    memo = {"nans": {}, "refs": refs, "live": lambda number, classes: None}
    assert decode_record({"ok": True, "value": {"a": 0}, "upd": [[0, [1, 2]], [1, {"d": []}]]}, memo) is inner
    assert inner == [1, 2] and table == {}
    decode_record({"ok": True, "value": None, "upd": [[0, [{"a": 0}, {"a": 1}]], [1, {"d": [["me", {"a": 1}]]}]]},
                  memo)  # fmt: skip
    assert inner[0] is inner and inner[1] is table and table["me"] is table  # cycles, as the program left them
    shared = decode([[5], {"a": 1}, {"d": [[1, {"a": 1}]]}])
    assert shared[0] is shared[1] is shared[2][1]
    args = decode_record({"ok": False, "raised": "ValueError", "exc": [{"a": 0}], "upd": [[0, [7]]]}, memo)
    assert args[0] is inner and inner == [7]  # an exception carries the object, changed before the raise
    returned = decode_record({"ok": True, "value": [[3], {"dq": [[{"a": 4}], None]}]}, memo)  # (args: number 2)
    assert refs[3] is returned and refs[4] == [3] and refs[5] is returned[1] and refs[5][0] is refs[4]
    later = decode_record({"ok": True, "value": [{"a": 5}, {"a": 3}], "upd": [[5, {"dq": [[], None]}]]}, memo)
    assert later[0] is returned[1] and later[1] is returned and returned[1] == collections.deque()  # live objects
    for malformed in ([[0, {"d": []}]], [[0, [1]], [0, [2]]], [[0, [{"a": 99}]]], [[1, {"s": [[1]]}]], [[99, [1]]]):
        with pytest.raises(ValueError):
            decode_record({"ok": True, "value": [[5]], "upd": malformed}, memo)
        assert inner == [7] and len(refs) == 7  # nothing changed (the record's own list: by LiveObjects.apply)
    nan = {"nan": [3, "fff8000000000000"]}  # a NaN's number in the run and its bits (sign and payload)
    assert decode(nan, 0, memo) is decode(nan, 0, memo) and str(decode(nan)) == "nan"
    assert decode(nan) is not decode(nan)


def test_stdio_integers_compare_exactly_without_int_limits():
    long = "9" * 5000  # past int()'s 4,300-digit limit
    for output in ("--5", "+-5", "-+5", long, "5" + long, "٥"):
        assert compare_stdio(output, "5", 1e-6) is False
    assert compare_stdio(long, long, 1e-6) is True
    assert compare_stdio("0" + long + " -0 +7", long + " 0 7", 1e-6) is True
    assert compare_stdio("-" + long, long, 1e-6) is False


def test_a_fraction_with_huge_parts_is_refused_before_its_gcd():
    """Fraction() normalises with a gcd that is quadratic in the parts' size (seconds for million-bit parts, in the
    trainer): a part over 2**15 bits is refused; at the bound a fraction still decodes, normalised."""
    rng = random.Random(5)
    huge = [{"i": format(rng.getrandbits(1 << 20) | 1, "x")} for _ in range(2)]
    started = time.perf_counter()
    with pytest.raises(ValueError, match="'q'"):
        decode({"q": huge})
    assert time.perf_counter() - started < 1.0  # generous: the gcd alone takes seconds
    big = (1 << ((1 << 15) - 1)) - 1  # 2 * big has exactly 2**15 bits
    assert decode({"q": [{"i": format(2 * big, "x")}, 4]}) == Fraction(big, 2)


def test_the_trainer_builds_no_table_for_a_sets_order_and_an_evaluation_a_bounded_number(monkeypatch):
    """The trainer checks records for their shape and compares call results (``any_order``): rebuilding a set in
    the program's order with a presized table (placeholder entries) is the evaluation's work, not the trainer's (a
    program returning sets whose tables grew large cost the trainer seconds and, red team round 12, 64 MB a record
    of 2.9 KB). An evaluation rebuilds tables up to a budget of its process (a fresh fork per evaluation); past
    it, the set keeps the program's order without a table (``ProgramOrderSet``)."""
    record = {"ok": True, "value": {"S": [1 << 15, [1, 8]]}}  # a fresh 8-slot set iterates as [8, 1]
    left = plain_data._SLOTS_LEFT[0]
    for trainer in ({"loose": True, "any_order": True}, {"any_order": True}):
        value = decode_record(record, trainer)
        assert value == {1, 8} and type(value) is set and plain_data._SLOTS_LEFT[0] == left
    value = decode_record(record, {})
    assert list(value) == [1, 8] and type(value) is set and plain_data._SLOTS_LEFT[0] == left - (1 << 15)
    monkeypatch.setattr(plain_data, "_SLOTS_LEFT", [(1 << 15) - 1])  # not enough left for this table
    value = decode_record(record, {})
    assert list(value) == [1, 8] and type(value) is not set and isinstance(value, set)
    assert plain_data._SLOTS_LEFT[0] == (1 << 15) - 1


SPARSE_SETS = """def sparse(k):
    out = []
    for _ in range(128):
        s = set(range(10000))  # a set never shrinks: two elements left in a 32768-slot table
        s.intersection_update({2, 9})
        out.append(s)
    return out
"""


def test_sparse_sets_cost_the_trainer_no_table_and_score_as_in_python(backend):
    """Red team round 12 (R12J-1/2): records of 128 two-element sets in large tables; the trainer decoded each set
    into a presized table (64 MB a record); now it rebuilds none, and the assert test's evaluation stays in its
    budget, so the right program passes (it raised MemoryError in the evaluation)."""
    left = plain_data._SLOTS_LEFT[0]
    program = "```python\n" + SPARSE_SETS + "```"
    calls = {"kind": "call", "fn_name": "sparse", "cases": [{"args": [k], "expected": []} for k in range(10)]}
    asserts = {"kind": "assert", "code": "r = sparse(0)\nassert len(r) == 128 and all(s == {2, 9} for s in r)"}
    # sets never equal JSON's lists: the call test fails every case, each record decoded and compared
    assert CodeTests("fraction", timeout_s=30)([program, program], tests=[calls, asserts]) == [0.0, 1.0]
    assert plain_data._SLOTS_LEFT[0] == left  # the trainer's process rebuilt no table


def test_small_sets_are_real_sets_in_the_programs_order():
    """Of two colliding elements the first inserted takes the first slot, so a fresh set of the elements listed in
    the program's order can iterate otherwise (``{15, 7}`` made from 15 then 7 lists as [7, 15]): such a set was a
    ``ProgramOrderSet``, whose C operations (``set(s)``, ``copy()``, ``-``, ``&``) follow the judge's table, for
    15 % of small int sets (red team round 13, R13J-1). Other insertion orders into a table of the program's size are
    tried first."""
    rng = random.Random(13)
    programs = [set(rng.sample(range(1000), rng.choice([3, 5, 10]))) for _ in range(1000)]
    real = 0
    for program in programs:
        slots = max((set.__sizeof__(program) - set.__sizeof__(set())) // 16, 8)
        value = decode_record({"ok": True, "value": {"S": [slots, list(program)]}}, {})
        assert list(value) == list(program)
        real += type(value) is set and list(value.copy()) == list(program.copy())
    assert real >= 0.99 * len(programs)  # was ~85%


def test_a_literal_with_colliding_elements_is_judged_as_python_judges_it(backend):
    program = "def g():\n    return {15, 7}\n"
    for test in ("assert list(set(g())) == [7, 15]", "assert type(g()) is set", "assert list(g().copy()) == [7, 15]"):
        assert run_tests(program, {"kind": "assert", "code": test}).all_passed, test
    assert not run_tests(program, {"kind": "assert", "code": "assert list(set(g())) == [15, 7]"}).all_passed
