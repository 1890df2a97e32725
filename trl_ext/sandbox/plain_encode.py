"""Plain data as tagged JSON, the encoder of the judge's side: the test's arguments (and its changes to the run's
objects) for the sandbox. ``plain_data.py`` decodes the program's results in the same format.

Stdlib only, and no trl_ext import but the program-order sets: loaded like ``plain_data.py`` (see there).
"""

from __future__ import annotations

import base64
import collections
import json
import math
import re
import struct
import sys
from typing import Any

if __package__:  # the judge: a module of the package
    from trl_ext.sandbox.program_sets import _plain_kind
else:  # the evaluation worker: loaded by its path before this file (see replay.py)
    _plain_kind = sys.modules["trl_ext_program_sets"]._plain_kind

_BIG_INT_BITS = 12000  # beyond ~3600 digits ints travel as hex: int('...') has a 4300-digit limit
_MAX_DEPTH = 100
_FACTORIES = {f.__name__: f for f in (int, float, str, list, dict, set, tuple, bool, bytes, frozenset)}


def encode(value: Any, depth: int = 0, graph: tuple[dict, list] | None = None, bare: bool = False) -> Any:
    """JSON-able tagged form of plain data, by exact type; raises TypeError for anything else. Sets are sorted
    by their elements' JSON, so equal values always encode identically (they key the recorded results). Lists,
    dicts and sets keep their identity: each is numbered where first met (before its items) and sent once, an
    alias or a cycle as {"a": number}; ``graph`` ({id: number}, [objects in number order]) spans one call, or an
    assert test's whole run (where an object the program returned is sent by its number too). ``bare``: the
    contents of a numbered object, never a reference to itself."""
    if depth > _MAX_DEPTH:
        raise TypeError("value nested too deeply")
    kind = _plain_kind(value)
    if kind is str:
        return value if value.isascii() or not _SURROGATE.search(value) else {"u": text_parts(value)}
    if value is None or kind is bool:
        return value
    if kind is int:
        return value if value.bit_length() <= _BIG_INT_BITS else {"i": format(value, "x")}
    if kind is float:
        if math.isfinite(value) or value == value:
            return value if math.isfinite(value) else {"f": repr(value)}
        nans = graph[0].get("nans") if graph is not None else None  # an assert test's run: the NaNs by number
        return {"nb": nan_bits(value)} if nans is None else {"nb": [nan_bits(value), _nan_number(nans, value)]}
    if kind in _TRACKED and not bare:
        numbers, shared = graph if graph is not None else ({}, [])
        if id(value) in numbers:
            return {"a": numbers[id(value)]}
        numbers[id(value)] = len(shared)
        shared.append(value)  # alive while the graph is: its id stays its own
        graph = numbers, shared
    if kind is list:
        return [encode(v, depth + 1, graph) for v in value]
    if kind is tuple:
        return {"t": [encode(v, depth + 1, graph) for v in value]}
    if kind is set or kind is frozenset:  # elements are hashable: no list, dict or set among them
        items = sorted((encode(v, depth + 1) for v in value), key=lambda e: json.dumps(e))
        return {"s" if kind is set else "fs": items}
    if kind is dict:
        return {"d": [[encode(k, depth + 1), encode(v, depth + 1, graph)] for k, v in value.items()]}
    if kind is bytes or kind is bytearray:
        return {"b" if kind is bytes else "ba": base64.b64encode(value).decode()}
    if kind is complex:
        return {"c": [encode(value.real, depth + 1), encode(value.imag, depth + 1)]}
    if kind is collections.deque:
        return {"dq": [[encode(v, depth + 1, graph) for v in value], value.maxlen]}
    if kind in _TRACKED:  # Counter, OrderedDict, defaultdict (with a builtin type, or no factory)
        pairs = [[encode(k, depth + 1), encode(v, depth + 1, graph)] for k, v in value.items()]
        if kind is not collections.defaultdict:
            return {"C" if kind is collections.Counter else "od": pairs}
        factory = value.default_factory
        name = None if factory is None else getattr(factory, "__name__", None)
        if factory is not None and _FACTORIES.get(name) is not factory:  # a lambda would be the test's code
            raise TypeError("a defaultdict argument's factory must be a builtin type")
        return {"dd": [name, pairs]}
    if graph is not None and id(value) in graph[0]:  # an iterator the program returned: by its number
        return {"a": graph[0][id(value)]}
    raise TypeError(f"{kind.__name__} is not plain data")


_SURROGATE = re.compile("([\ud800-\udfff])")


def text_parts(value: str) -> list:
    """A str holding surrogates as [run, code point, run, ...]: its runs without surrogates (JSON strings cross
    them exactly) and each surrogate code point as an int, which JSON cannot join with its neighbour (it joins an
    escaped high and low surrogate into one astral character: two code points would arrive as one)."""
    pieces = _SURROGATE.split(value)  # runs at even positions, each surrogate (captured) at the odd ones
    return [ord(piece) if at % 2 else piece for at, piece in enumerate(pieces) if piece]


def text_of(parts: Any) -> str:
    """Inverse of ``text_parts`` (the "u" tag of either side), total: ValueError for anything but strs and ints
    that are surrogate code points."""
    if type(parts) is not list or not parts:
        raise ValueError("a text with surrogates is a list of runs and code points")
    if not all(type(p) is str or (type(p) is int and 0xD800 <= p <= 0xDFFF) for p in parts):
        raise ValueError("a text with surrogates is a list of runs and code points")
    return "".join([p if type(p) is str else chr(p) for p in parts])


def nan_bits(value: float) -> str:
    """A NaN's 64 bits as 16 hex digits, big-endian: its sign and payload cross (``copysign``, ``struct`` see them)."""
    return struct.pack(">d", value).hex()


def _nan_number(nans: dict, value: float) -> int:
    """The number of the NaN object ``value`` in the run: the program's, or a new one below 0 for the test's own
    (the sandbox then makes one object for it, which the program may return: the test's own object again)."""
    number = next((number for number, known in nans.items() if known is value), None)
    if number is None:
        number = min(min(nans, default=0), 0) - 1
        nans[number] = value
    return number


def nan_of(bits: Any) -> float:
    """Inverse of ``nan_bits``, total: ValueError for anything but 16 hex digits of a NaN."""
    if type(bits) is not str or len(bits) != 16 or not all(c in "0123456789abcdef" for c in bits):
        raise ValueError("a NaN's bits are 16 lowercase hex digits")
    value = struct.unpack(">d", bytes.fromhex(bits))[0]
    if value == value:
        raise ValueError("the bits of no NaN")
    return value


# the mutable types a test may pass as arguments: numbered where first met, updated in place after each call
_TRACKED = frozenset({list, set, dict, bytearray, collections.deque, collections.Counter})
_TRACKED |= {collections.OrderedDict, collections.defaultdict}


def encode_call(args: tuple | list, kwargs: dict, graph: tuple[dict, list] | None = None) -> tuple[list, dict, list]:
    """(arguments, keyword arguments, the graph's objects in number order) of one call, encoded as one graph: an
    object the test passes twice (``f(x, x)``, ``[r, r]``) is one object in the sandbox too, and the k-th object
    listed is the one the sandbox's records call k (``decode_record``). ``graph``: an assert test's run-wide one."""
    graph = graph if graph is not None else ({}, [])
    encoded_args = [encode(v, 1, graph) for v in args]
    encoded_kwargs = {"d": [[encode(k, 1), encode(v, 1, graph)] for k, v in kwargs.items()]}
    return encoded_args, encoded_kwargs, graph[1]
