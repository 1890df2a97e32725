"""Classes 8 and 9: a str crosses between the judge and the sandbox with its exact code points. JSON joins an
escaped high and low surrogate into one astral character, so two lone surrogates ('\\ud83d' + '\\ude00', two code
points) arrived as one ('\\U0001F600'): a wrong program passed ``== '\\U0001F600'`` and ``len(...) == 1``, in values,
dict keys, exception text and a call test's expected value, and a test's argument reached the program joined. A str
holding any surrogate now crosses tagged ({"u": [run, code point, ...]}) in both directions (docs/sandbox.md, R8-1).
"""

from __future__ import annotations

import json
import random

import pytest

from tests.sandbox.assert_path import assert_wrong_fail_right_pass, grade_asserts
from tests.sandbox.test_test_environment import cpython_passes
from trl_ext.sandbox import forkserver, run_tests
from trl_ext.sandbox._harness import _parse_json
from trl_ext.sandbox.backends import BACKEND_ENV
from trl_ext.sandbox.judge import harness_runtime
from trl_ext.sandbox.plain_data import decode
from trl_ext.sandbox.plain_encode import encode, encode_call

ALPHABET = ["a", "\u00e9", "\U0001f600", "\ud83d", "\ude00", "\ud800", "\udfff", "\\", '"', "\x00", "\ud83d\ude00"]


def _harness() -> dict:
    """The harness's own value functions, as the judge sends them, run in this process."""
    namespace = {"__name__": "_harness_runtime"}
    exec(compile(harness_runtime()["source"], "_harness_runtime.py", "exec"), namespace)
    return namespace


def _random_texts(count: int, seed: int = 20) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 12))) for _ in range(count)]


def _same(got: object, text: str) -> bool:
    return type(got) is str and got == text and len(got) == len(text)


def test_random_texts_round_trip_from_the_sandbox_with_cpythons_len_and_equality():
    harness = _harness()
    for text in _random_texts(3000):
        assert _same(decode(json.loads(harness["_json_str"](text))), text), ascii(text)
        value = decode(json.loads(harness["_encode"]({text: [text, (text,)]})))
        harness["_SEEN"].clear()
        ((key, items),) = value.items()
        assert _same(key, text) and _same(items[0], text) and _same(items[1][0], text), ascii(text)


def test_random_texts_round_trip_into_the_sandbox_with_cpythons_len_and_equality():
    harness = _harness()
    for text in _random_texts(3000, seed=21):
        parsed = _parse_json(json.dumps(encode({text: [text]})))  # the harness's own JSON parser
        ((key, items),) = harness["_decode"](parsed, []).items()
        assert _same(key, text) and _same(items[0], text), ascii(text)
        args, kwargs, _ = encode_call([text], {"k" + text: text})
        args, kwargs = harness["_decode_call"](*_parse_json(json.dumps([args, kwargs])), [])
        assert _same(args[0], text) and _same(next(iter(kwargs)), "k" + text), ascii(text)


def test_a_forged_text_tag_is_malformed_never_a_crash():
    for inner in ([], ["a", 0xDBFF + 0x2000], ["a", 65], [1.5], "ab", None, [["a"]], [True]):
        with pytest.raises(ValueError):
            decode({"u": inner})
    assert decode({"u": ["a", 0xD800, "b"]}) == "a\ud800b"


PAIR = "def f():\n    return '\\ud83d' + '\\ude00'\n"
TEXTS = """def f():
    return '\\ud83d' + '\\ude00'
def listed():
    return ['\\ud83d\\ude00']
def keyed():
    return {'\\ud83d\\ude00': 1}
def fails():
    raise ValueError('\\ud83d\\ude00')
def size(s):
    return len(s)
def add(x):
    x.append('\\ud83d\\ude00')
def rev(s):
    b = s.encode('utf-16-le', 'surrogatepass')
    units = [b[i:i + 2].decode('utf-16-le', 'surrogatepass') for i in range(0, len(b), 2)]
    return ''.join(reversed(units))
def names(**kw):
    return list(kw)
"""
WRONG = [  # CPython fails each; the judge joining surrogate pairs passed each
    "assert f() == '\\U0001F600'",
    "assert len(f()) == 1",
    "assert listed() == ['\\U0001F600']",
    "assert keyed() == {'\\U0001F600': 1}",
    "try:\n    fails()\nexcept ValueError as e:\n    assert str(e) == '\\U0001F600'",
    "assert size('\\ud83d\\ude00') == 1",
    "x = []\nadd(x)\nassert x == ['\\U0001F600']",
    "assert rev('a\\U0001F600b') == 'b\\U0001F600a'",  # UTF-16 code units reversed: a wrong reversal
]
RIGHT = [
    "assert f() == '\\ud83d\\ude00' and len(f()) == 2 and f() != '\\U0001F600'",
    "assert listed() == ['\\ud83d\\ude00'] and keyed() == {'\\ud83d\\ude00': 1} and len(list(keyed())[0]) == 2",
    "try:\n    fails()\nexcept ValueError as e:\n    assert str(e) == '\\ud83d\\ude00' and len(e.args[0]) == 2",
    "assert size('\\ud83d\\ude00') == 2 and size('\\U0001F600') == 1 and size('x\\udfff\\ud800') == 3",
    "x = []\nadd(x)\nassert x == ['\\ud83d\\ude00'] and len(x[0]) == 2",
    "assert rev('ab') == 'ba' and len(rev('\\U0001F600')) == 2",
    "assert names(**{'\\ud83d\\ude00': 1}) == ['\\ud83d\\ude00']",
]
LAUNCHES = [("bwrap", "0"), ("landlock", "1")]  # the per-run bwrap launch and landlock's fork server


def test_the_plain_cpython_verdicts():
    assert not any(cpython_passes(TEXTS, test) for test in WRONG)
    assert all(cpython_passes(TEXTS, test) for test in RIGHT)


@pytest.mark.parametrize("launch", LAUNCHES, ids=["-".join(launch) for launch in LAUNCHES])
def test_surrogates_cross_exactly_through_code_tests(launch, monkeypatch, request):
    assert_wrong_fail_right_pass(launch, TEXTS, WRONG, RIGHT, monkeypatch, request)


@pytest.mark.parametrize("launch", LAUNCHES, ids=["-".join(launch) for launch in LAUNCHES])
def test_a_call_tests_expected_text_is_compared_code_point_by_code_point(launch, monkeypatch):
    monkeypatch.setenv(BACKEND_ENV, launch[0])
    monkeypatch.setenv(forkserver.FORKSERVER_ENV, launch[1])
    wrong = {"kind": "call", "fn_name": "f", "cases": [{"args": [], "expected": "\U0001f600"}]}
    right = {"kind": "call", "fn_name": "f", "cases": [{"args": [], "expected": "\ud83d\ude00"}]}
    echo = {"kind": "call", "fn_name": "f", "cases": [{"args": ["x\ud83d\ude00"], "expected": 3}]}
    assert not run_tests(PAIR, wrong).all_passed
    assert run_tests(PAIR, right).all_passed
    assert run_tests("def f(s):\n    return len(s)\n", echo).all_passed


# printed text the test captures crosses exactly too, and a test may end with exit()/quit() as in CPython (red team
# round 8b: the first gave invalid_result, the second was refused as a shadowed builtin)
PRINTS = "def f():\n    print('a\\ud83d' + '\\ude00b')\n    return 1\n"
CAPTURE = "import io, contextlib\nbuf = io.StringIO()\nwith contextlib.redirect_stdout(buf):\n    assert f() == 1\n"
CAPTURED = [CAPTURE + "assert len(buf.getvalue()) == 5", CAPTURE + "assert len(buf.getvalue()) == 4"]
ADDS = "def g(x):\n    return x + 1\n"
EXITS = ["assert g(1) == 2\nif g(2) != 3:\n    exit(1)", "assert g(1) == 2\nif g(2) == 3:\n    quit(3)"]


@pytest.mark.parametrize("launch", LAUNCHES[:2], ids=["-".join(launch) for launch in LAUNCHES[:2]])
def test_captured_surrogates_and_exit_in_a_test_get_cpythons_verdicts(launch, monkeypatch):
    tests, programs = CAPTURED + EXITS, [PRINTS, PRINTS, ADDS, ADDS]
    expected = [float(cpython_passes(program, test)) for program, test in zip(programs, tests)]
    assert expected == [1.0, 0.0, 1.0, 0.0]
    scores, _ = grade_asserts(launch, programs, tests, monkeypatch)
    assert scores == expected
