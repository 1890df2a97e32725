"""Class 8: a NaN crosses with its sign and payload (its 64-bit pattern), both ways, complex parts too. A NaN
crossed as "a NaN" and arrived as ``float('nan')``: ``-float('nan')`` passed ``math.copysign(1.0, f()) == 1.0`` and
a NaN with a payload passed a ``struct.pack`` test (docs/sandbox.md, R8-2). Each NaN object of the run still has
its number, so ``[x] == [x]`` holds exactly where one interpreter says it does."""

from __future__ import annotations

import json
import random
import struct

import pytest

from tests.sandbox.assert_path import assert_wrong_fail_right_pass
from tests.sandbox.test_test_environment import cpython_passes
from trl_ext.sandbox._harness import _parse_json
from trl_ext.sandbox.judge import harness_runtime
from trl_ext.sandbox.plain_data import decode
from trl_ext.sandbox.plain_encode import encode


def _harness() -> dict:
    namespace = {"__name__": "_harness_runtime"}
    exec(compile(harness_runtime()["source"], "_harness_runtime.py", "exec"), namespace)
    return namespace


def _bits(value: float) -> bytes:
    return struct.pack("<d", value)


def _random_nans(count: int) -> list[float]:
    rng = random.Random(5)
    nans = []
    for _ in range(count):
        sign, payload = rng.getrandbits(1) << 63, rng.randint(1, (1 << 52) - 1)
        nans.append(struct.unpack("<d", struct.pack("<Q", sign | (0x7FF << 52) | payload))[0])
    return nans + [float("nan"), -float("nan")]


def test_nan_bit_patterns_round_trip_both_ways_complex_parts_too():
    harness = _harness()
    nans = _random_nans(500)
    for nan in nans:
        for value in (nan, [nan, nan], complex(nan, -nan), complex(1.0, nan)):
            back = decode(json.loads(harness["_encode"](value)), 0, {"nans": {}})
            harness["_SEEN"].clear()
            sent = harness["_decode"](_parse_json(json.dumps(encode(value))), [])
            for got in (back, sent):
                if type(value) is list:
                    assert [_bits(v) for v in got] == [_bits(v) for v in value]
                    assert got is sent or got[0] is got[1]  # one NaN object of the run: one object in the judge
                elif type(value) is complex:
                    assert _bits(got.real) + _bits(got.imag) == _bits(value.real) + _bits(value.imag)
                else:
                    assert _bits(got) == _bits(value)


def test_a_forged_nan_is_malformed_never_a_crash():
    for inner in (0, [0], [0, "7ff0000000000000"], [0, "zz"], [0, "7ff8"], [2**40, "7ff8000000000000"], [0, 1.5]):
        with pytest.raises(ValueError):
            decode({"nan": inner}, 0, {"nans": {}})


NANS = """import math, struct
def neg():
    return -float('nan')
def payload():
    return struct.unpack('<d', struct.pack('<Q', 0x7ff8000000000001))[0]
def listed():
    return [-float('nan')]
def cx():
    return complex(-float('nan'), 1.0)
def sign(x):
    return math.copysign(1.0, x)
def bits(x):
    return struct.pack('<d', x)
"""
WRONG = [  # CPython fails each; the judge sending NaNs without their bits passed each
    "import math\nassert math.copysign(1.0, neg()) == 1.0",
    "import struct\nassert struct.pack('<d', payload()) == struct.pack('<d', float('nan'))",
    "import math\nassert math.copysign(1.0, listed()[0]) == 1.0",
    "import math\nassert math.copysign(1.0, cx().real) == 1.0",
    "assert sign(-float('nan')) == 1.0",
]
RIGHT = [
    "import math\nx = neg()\nassert math.copysign(1.0, x) == -1.0 and x != x and [x] == [x]",
    "import struct\nassert struct.pack('<d', payload()) == struct.pack('<Q', 0x7ff8000000000001)",
    "import math\nassert math.copysign(1.0, listed()[0]) == -1.0 and math.copysign(1.0, cx().real) == -1.0",
    "import struct\nn = struct.unpack('<d', struct.pack('<Q', 0xfff8000000000005))[0]\n"
    "assert sign(n) == -1.0 and bits(n) == struct.pack('<Q', 0xfff8000000000005)",
]
LAUNCHES = [("bwrap", "0"), ("landlock", "1")]


def test_the_plain_cpython_verdicts():
    assert not any(cpython_passes(NANS, test) for test in WRONG)
    assert all(cpython_passes(NANS, test) for test in RIGHT)


@pytest.mark.parametrize("launch", LAUNCHES, ids=["-".join(launch) for launch in LAUNCHES])
def test_nans_keep_sign_and_payload_through_code_tests(launch, monkeypatch, request):
    assert_wrong_fail_right_pass(launch, NANS, WRONG, RIGHT, monkeypatch, request)
