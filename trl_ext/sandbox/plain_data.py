"""Plain data as tagged JSON, the judge's side (the harness's ``_harness_values.py`` writes the same format): ``encode``
for the test's arguments, ``decode`` for the program's results, total on untrusted input. The decoder rebuilds
standard types (Counter, OrderedDict, defaultdict, deque, Fraction, Decimal, range, bytearray, dict views, an
iterator over a consumed iterator's items; one generic tuple class for namedtuples), so that the test's ``==``
is CPython's own on equal objects; an evaluation's ``memo`` gives identity back where ``==`` depends on it
(NaN objects, the test's own argument containers, updated in place).

Stdlib only and no trl_ext import: ``replay.py`` imports it, in the judge as a module of the package and in the
evaluation worker (which runs ``replay.py`` by its path) as the file next to it.
"""

from __future__ import annotations

import array
import base64
import collections
import decimal
import fractions
import functools
import json
import math
from typing import Any

_BIG_INT_BITS = 12000  # beyond ~3600 digits ints travel as hex: int('...') has a 4300-digit limit
_MAX_HEX_DIGITS = 1 << 18  # a bigger int (over a million bits) is no answer: refused, not decoded
_MAX_DEPTH = 100
_MAX_SHARED_HASHES = 64  # elements of one set or dict beyond this many sharing a hash: a quadratic build, refused
_MAX_ITEMS = 1 << 20  # elements of one list, set or mapping (the run's output cap bounds them all together too)


def encode(value: Any, depth: int = 0) -> Any:
    """JSON-able tagged form of plain data, by exact type; raises TypeError for anything else. Sets are sorted
    by their elements' JSON, so equal values always encode identically (they key the recorded results)."""
    if depth > _MAX_DEPTH:
        raise TypeError("value nested too deeply")
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if kind is int:
        return value if value.bit_length() <= _BIG_INT_BITS else {"i": format(value, "x")}
    if kind is float:
        return value if math.isfinite(value) else {"f": repr(value)}
    if kind is list:
        return [encode(v, depth + 1) for v in value]
    if kind is tuple:
        return {"t": [encode(v, depth + 1) for v in value]}
    if kind is set or kind is frozenset:
        items = sorted((encode(v, depth + 1) for v in value), key=lambda e: json.dumps(e))
        return {"s" if kind is set else "fs": items}
    if kind is dict:
        return {"d": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if kind is bytes:
        return {"b": base64.b64encode(value).decode()}
    if kind is complex:
        return {"c": [encode(value.real, depth + 1), encode(value.imag, depth + 1)]}
    raise TypeError(f"{kind.__name__} is not plain data")


def decode(obj: Any, depth: int = 0, memo: dict | None = None) -> Any:
    """Plain data from its tagged JSON form (as ``json.loads`` returns it). Total on untrusted input: bounded
    depth, element count, big-int size and hash sharing; anything malformed raises ValueError and nothing else.
    ``memo`` (an evaluation's): "nans" maps the run's NaN numbers to one object each, "originals" lists the
    call's argument containers (``_mutables``) that a "m" tag updates in place and returns; without it both tags
    decode to new objects."""
    if depth > _MAX_DEPTH:
        raise ValueError("value nested too deeply")
    kind = type(obj)
    if obj is None or kind in (bool, int, float, str):
        return obj
    if kind is list and len(obj) <= _MAX_ITEMS:
        return [decode(v, depth + 1, memo) for v in obj]
    if kind is not dict or len(obj) != 1:
        raise ValueError("malformed plain data")
    ((tag, inner),) = obj.items()
    try:
        return _decode_tagged(tag, inner, depth + 1, {} if memo is None else memo)
    except (TypeError, ValueError, KeyError, IndexError, ArithmeticError) as exc:  # decimal's errors too
        raise ValueError(f"malformed plain data ({tag!r:.20}: {type(exc).__name__})") from None


def _items(inner: Any, depth: int, memo: dict) -> list:
    if type(inner) is not list or len(inner) > _MAX_ITEMS:
        raise ValueError("a container tag needs a list")
    return [decode(v, depth, memo) for v in inner]


def _pairs(inner: Any, depth: int, memo: dict) -> list[tuple]:
    if type(inner) is not list or len(inner) > _MAX_ITEMS or not all(type(i) is list and len(i) == 2 for i in inner):
        raise ValueError("mapping items must be [key, value] pairs")
    pairs = [(decode(k, depth, memo), decode(v, depth, memo)) for k, v in inner]
    _hashed([k for k, _ in pairs])
    return pairs


def _hashed(keys: list) -> list:
    """``keys``, refused when they share hashes beyond a small bound (a set of them builds in quadratic time)."""
    hashes = [hash(k) for k in keys]  # TypeError for an unhashable key: malformed
    if len(hashes) - len(set(hashes)) > _MAX_SHARED_HASHES:
        raise ValueError("too many elements share a hash")
    return keys


def _name(value: Any) -> str:
    if type(value) is not str or not value.isidentifier() or len(value) > 100:
        raise ValueError("not a name")
    return value


class RecordTuple(tuple):
    """A program's namedtuple: one class for all (a class per name took the trainer ~5 s for 28,000 names)."""

    def __getattr__(self, attribute: str) -> Any:
        if attribute in (fields := self.__dict__.get("_fields", ())):
            return self[fields.index(attribute)]
        raise AttributeError(attribute)

    def _asdict(self) -> dict:
        return dict(zip(self.__dict__.get("_fields", ()), self))

    def _replace(self, **changes: Any) -> RecordTuple:
        fields = self.__dict__.get("_fields", ())
        if not set(changes) <= set(fields):
            raise ValueError(f"Got unexpected field names: {sorted(set(changes) - set(fields))!r}")
        record = RecordTuple(changes.get(field, value) for field, value in zip(fields, self))
        record._fields = fields
        return record


_ARRAY_CODES = {"ar": tuple(array.typecodes), "mv": ("b", "B", "h", "H", "i", "I", "l", "L", "q", "Q", "f", "d")}
_FACTORIES = {f.__name__: f for f in (int, float, str, list, dict, set, tuple, bool, bytes, frozenset)}


def _decode_tagged(tag: str, inner: Any, depth: int, memo: dict) -> Any:
    if (simple := _SIMPLE_TAGS.get(tag)) is not None:
        return simple(inner, depth, memo)
    if tag == "m" and type(inner) is list and len(inner) == 2 and type(inner[0]) is int:
        originals = memo.get("originals", ())
        mine = originals[inner[0]] if 0 <= inner[0] < len(originals) else None
        return _update(mine, decode(inner[1], depth, memo))
    if tag == "o" and type(inner) is list and len(inner) == 2 and type(inner[0]) is int:  # a returned container
        after, objects = decode(inner[1], depth, memo), memo.setdefault("objects", {})
        return objects.setdefault(inner[0], after) if inner[0] not in objects else _update(objects[inner[0]], after)
    if tag == "nan" and type(inner) is int and 0 <= inner <= _MAX_ITEMS:  # one object per NaN of the run
        return memo.setdefault("nans", {}).setdefault(inner, float("nan"))
    if tag == "dec" and type(inner) is str and len(inner) <= _MAX_HEX_DIGITS and "s" not in inner.lower():
        return decimal.Decimal(inner)  # exact; never a signalling NaN (comparing one raises)
    if tag == "dd" and type(inner) is list and len(inner) == 2:
        factory = None if inner[0] is None else _FACTORIES[inner[0]] if type(inner[0]) is str else None
        if type(inner[0]) is dict and inner[0].keys() == {"v"}:  # a lambda's value, made anew for every missing key
            decode(inner[0]["v"], depth)  # malformed: refused now, never when the test reads a key
            factory = functools.partial(decode, inner[0]["v"], depth)
        elif factory is None and inner[0] is not None:
            raise ValueError("a defaultdict factory is a builtin type's name or a value")
        return collections.defaultdict(factory, _pairs(inner[1], depth, memo))
    if tag in ("ar", "mv") and type(inner) is list and len(inner) == 2 and inner[0] in _ARRAY_CODES[tag]:
        items = array.array(inner[0], _items(inner[1], depth, memo))
        return items if tag == "ar" else memoryview(items)
    if tag == "E" and inner == "...":
        return Ellipsis
    if tag == "dq" and type(inner) is list and len(inner) == 2 and (inner[1] is None or type(inner[1]) is int):
        return collections.deque(_items(inner[0], depth, memo), inner[1])
    if tag == "nt" and type(inner) is list and len(inner) == 3 and type(inner[1]) is list:
        record = RecordTuple(_items(inner[2], depth, memo))
        fields = tuple(_name(f) for f in [inner[0], *inner[1]])[1:]
        if len(fields) != len(record):
            raise ValueError("a namedtuple needs one field per value")
        record._fields = fields  # fields only name the items: == and hash stay a tuple's
        return record
    if tag == "q" and type(inner) is list and len(inner) == 2 and all(type(v) in (int, dict) for v in inner):
        numerator, denominator = decode(inner[0], depth, memo), decode(inner[1], depth, memo)
        if type(numerator) is not int or type(denominator) is not int or denominator <= 0:
            raise ValueError("a fraction needs integer parts and a positive denominator")
        return fractions.Fraction(numerator, denominator)
    if tag == "r" and type(inner) is list and len(inner) == 3:
        bounds = [decode(v, depth, memo) for v in inner]
        if not all(type(v) is int for v in bounds):
            raise ValueError("a range needs integer bounds")
        return range(*bounds)
    if tag == "b" and type(inner) is str:
        return base64.b64decode(inner, validate=True)
    if tag == "c" and type(inner) is list and len(inner) == 2:
        real, imag = decode(inner[0], depth, memo), decode(inner[1], depth, memo)
        if type(real) is not float or type(imag) is not float:
            raise ValueError("complex parts must be floats")
        return complex(real, imag)
    if tag == "f" and inner in ("nan", "inf", "-inf"):
        return float(inner)
    if tag == "i" and type(inner) is str and len(inner) <= _MAX_HEX_DIGITS:
        return int(inner, 16)
    raise ValueError("unknown tag")


_SIMPLE_TAGS = {
    "t": lambda inner, depth, memo: tuple(_items(inner, depth, memo)),
    "s": lambda inner, depth, memo: set(_hashed(_items(inner, depth, memo))),
    "fs": lambda inner, depth, memo: frozenset(_hashed(_items(inner, depth, memo))),
    "d": lambda inner, depth, memo: dict(_pairs(inner, depth, memo)),
    "C": lambda inner, depth, memo: collections.Counter(dict(_pairs(inner, depth, memo))),
    "od": lambda inner, depth, memo: collections.OrderedDict(_pairs(inner, depth, memo)),
    "g": lambda inner, depth, memo: iter(_items(inner, depth, memo)),  # an iterator's items: equal only to itself
    # dict views rebuilt over a dict of their own: real dict_keys/values/items (set-like ==, repr, order)
    "dk": lambda inner, depth, memo: dict.fromkeys(_hashed(_items(inner, depth, memo))).keys(),
    "dv": lambda inner, depth, memo: dict(enumerate(_items(inner, depth, memo))).values(),
    "di": lambda inner, depth, memo: dict(_pairs(inner, depth, memo)).items(),
    "ba": lambda inner, depth, memo: bytearray(base64.b64decode(inner, validate=True)),
}


def _update(mine: Any, after: Any) -> Any:
    """``mine`` (an object the test holds), updated in place to what the program left of it (``after``); ``after``
    itself when there is no such object of the same type (a call test's check decodes without a memo)."""
    if mine is None or type(mine) is not type(after) or type(after) not in (list, dict, set):
        return after
    if type(mine) is list:
        mine[:] = after
    else:
        mine.clear()
        mine.update(after)
    return mine


def _mutables(value: Any, found: list, depth: int = 0) -> list:
    """The lists, dicts and sets in ``value``, children first, in the order the harness decodes them."""
    kind = type(value)
    if depth <= _MAX_DEPTH and kind in (list, tuple, set, frozenset, dict):
        for item in (v for pair in value.items() for v in pair) if kind is dict else value:
            _mutables(item, found, depth + 1)
        if kind in (list, set, dict):
            found.append(value)
    return found
