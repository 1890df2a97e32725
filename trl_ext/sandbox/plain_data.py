"""Plain data as tagged JSON, the judge's side (the harness's ``_harness_values.py`` writes the same format): ``encode``
for the test's arguments, ``decode`` for the program's results, total on untrusted input. The decoder rebuilds
standard types (Counter, OrderedDict, defaultdict, deque, Fraction, Decimal, range, bytearray, dict views, an
iterator over a consumed iterator's items; a real namedtuple class per class of the run), so that the test's ``==``
is CPython's own on equal objects. Identity crosses both ways where ``==`` or a mutation can tell: lists, dicts and
sets form one graph (an alias or a cycle is a reference, {"a": number}, to the object met first); in an assert
test the graph spans the whole run (``live.py``): a record sends [number, contents] of each numbered object the
call changed ("upd", after a raise too), the judge updates its objects in place, and an iterator the program
returns stays in the sandbox ({"gc": its classes}, a generator {"gen": null}); an evaluation's ``memo``
keeps NaN objects and the run's objects.

Stdlib only, and no trl_ext import but its encoder (``plain_encode.py``) and the program-order sets
(``program_sets.py``): ``replay.py`` imports it, in the judge as a module of the package and in the evaluation
worker (which runs ``replay.py`` by its path) as the file next to it.
"""

from __future__ import annotations

import array
import base64
import collections
import decimal
import fractions
import functools
import keyword
import sys
import weakref
from typing import Any

if __package__:  # the judge: modules of the package
    from trl_ext.sandbox import plain_encode as _encoder
    from trl_ext.sandbox import program_sets as _sets
else:  # the evaluation worker: loaded by their paths before this file (see replay.py)
    _encoder, _sets = sys.modules["trl_ext_plain_encode"], sys.modules["trl_ext_program_sets"]
_SHARED = ["_BIG_INT_BITS", "_FACTORIES", "_MAX_DEPTH", "_TRACKED", "encode", "encode_call", "text_of", "nan_of"]
_BIG_INT_BITS, _FACTORIES, _MAX_DEPTH, _TRACKED, encode, encode_call, text_of, nan_of = (
    getattr(_encoder, n) for n in _SHARED
)
ProgramOrderFrozenset, ProgramOrderSet, _plain_kind, subclass_value, _reordered = (
    getattr(_sets, n)
    for n in ("ProgramOrderFrozenset", "ProgramOrderSet", "_plain_kind", "subclass_value", "reordered")
)

_MAX_HEX_DIGITS = 1 << 18  # a bigger int (over a million bits) is no answer: refused, not decoded
# Fraction() normalises with a gcd, quadratic in the parts' size: 3.4 s for two million-bit parts (GIL held, in the
# trainer), 2 ms at this bound; a fraction with a bigger part is refused (the case fails), never normalised.
_MAX_FRACTION_BITS = 1 << 15
_MAX_SHARED_HASHES = 64  # elements of one set or dict beyond this many sharing a hash: a quadratic build, refused
_MAX_ITEMS = 1 << 20  # elements of one list, set or mapping (the run's output cap bounds them all together too)


def decode(obj: Any, depth: int = 0, memo: dict | None = None) -> Any:
    """Plain data from its tagged JSON form (as ``json.loads`` returns it). Total on untrusted input: bounded
    depth, element count, big-int size and hash sharing; anything malformed raises ValueError and nothing else.
    ``memo`` spans one record: "refs" numbers its lists, dicts and sets (the call's own argument objects first,
    see ``decode_record``) where each begins, so {"a": k} is that object again (an alias, or a cycle); an
    evaluation's "nans" maps the run's NaN numbers to one object each and "objects" its returned containers
    (the "o" tag), updated in place. Without a memo, identity holds within ``obj`` only."""
    if depth > _MAX_DEPTH:
        raise ValueError("value nested too deeply")
    kind = type(obj)
    if obj is None or kind in (bool, int, float, str):
        return obj
    if memo is None:
        memo = {"refs": []}
    if kind is list and len(obj) <= _MAX_ITEMS:
        made: list = []
        refs = memo.get("refs")
        (refs if refs is not None else memo.setdefault("refs", [])).append(made)  # numbered before its items
        made += [decode(v, depth + 1, memo) for v in obj]
        return made
    if kind is not dict or len(obj) != 1:
        raise ValueError("malformed plain data")
    ((tag, inner),) = obj.items()
    try:
        if "live" in memo or memo.get("loose"):  # an assert test's run (``decode_record``)
            return _live_tagged(tag, inner, depth + 1, memo)
        return _decode_tagged(tag, inner, depth + 1, memo)
    except (TypeError, ValueError, KeyError, IndexError, ArithmeticError) as exc:  # decimal's errors too
        raise ValueError(f"malformed plain data ({tag!r:.20}: {type(exc).__name__})") from None


def _register(made: Any, memo: dict) -> Any:
    """``made``, numbered in the record (before its items are decoded: an item may be ``made`` itself)."""
    refs = memo.get("refs")
    if refs is None:
        refs = memo["refs"] = []
    refs.append(made)
    return made


def decode_record(record: dict, memo: dict) -> Any:
    """Apply a call record's updates and decode its value ("ok") or its exception's arguments ("exc"; None when
    absent). In an assert test's run ``memo["refs"]`` holds the run's numbered objects (both sides number every
    list, dict, set and mutable library object that crossed, in the order met) and ``memo["live"]`` makes the
    judge's iterator for a number; "upd" holds [number, contents] for each of them the call changed, applied in
    place all at once after the whole record decoded (a malformed record changes none). ``memo["loose"]`` (a
    shape check without the run's objects): updates fill fresh objects and a reference to an earlier record's
    object stands for an unknown one. Raises ValueError (only) for a malformed record."""
    updates = record.get("upd", [])
    if type(updates) is not list or len(updates) > _MAX_ITEMS:
        raise ValueError("a record's updates are no list")
    refs = memo.setdefault("refs", [])
    count, targets = len(refs), []
    for entry in updates:
        if type(entry) is not list or len(entry) != 2 or type(entry[0]) is not int or entry[0] < 0:
            raise ValueError("an update is no [number, contents] pair")
        if entry[0] >= count and not memo.get("loose"):
            raise ValueError("an update of no object of the run")
        targets.append(refs[entry[0]] if entry[0] < count else _fresh(entry[1]))
    if len({entry[0] for entry in updates}) != len(updates):
        raise ValueError("an object updated twice in one record")
    contents = [_content(mine, entry[1], memo) for mine, entry in zip(targets, updates)]
    field = "value" if record.get("ok") is True else "exc"
    decoded = decode(record[field], 0, memo) if field in record else None
    for mine, content in zip(targets, contents):
        _update(mine, content)
    return decoded


_EMPTY = {"d": dict, "s": set, "ba": bytearray, "dq": collections.deque, "C": collections.Counter}
_EMPTY.update(od=collections.OrderedDict, dd=collections.defaultdict)
_LIVE_TAGS = frozenset({"ba", "dq", "C", "od", "dd", "ar"})  # mutable library values: numbered after their contents
_UNKNOWN = object()  # an earlier record's object, in a shape check


def _fresh(update: Any) -> Any:
    """An empty object of the type an update is written for (a list, or a tag of a mutable type)."""
    if type(update) is list:
        return []
    if type(update) is dict and len(update) == 1 and next(iter(update)) in _EMPTY:
        return _EMPTY[next(iter(update))]()
    raise ValueError("an argument update is of no mutable type")


def _live_tagged(tag: str, inner: Any, depth: int, memo: dict) -> Any:
    """A tagged value of an assert test's record: an iterator the program keeps in the sandbox (the judge's one,
    numbered where met), a mutable library value numbered after its contents (as the harness numbers them)."""
    if tag in ("gc", "gen"):  # numbered where met; "gc": its classes, "gen": a generator (null: asked for more
        # after its end, a no-op); a tag of its own: an iterator's items ("g", call tests) never pass for classes
        if (tag == "gen" and inner is not None) or (tag == "gc" and type(inner) is not list):
            raise ValueError("an iterator is {'gc': its classes} or {'gen': null}")
        if memo.get("loose"):
            return _register(iter(()), memo)
        refs = memo.setdefault("refs", [])
        made = memo["live"](len(refs), inner)  # its class: ``live.iterator_class`` (ValueError if malformed)
        refs.append(weakref.ref(made))  # the test's to drop: then the sandbox drops it too (``live.py``)
        return made
    if tag == "lv" and type(inner) is list and len(inner) == 2 and inner[0] in _VIEW_OF:  # a view of a live dict
        mapping = decode(inner[1], depth, memo)
        if mapping is _UNKNOWN:  # a shape check: an earlier record's dict
            return mapping
        if not isinstance(mapping, dict):
            raise ValueError("a view of no dict")
        return getattr(mapping, _VIEW_OF[inner[0]])()
    value = _decode_tagged(tag, inner, depth, memo)
    return _register(value, memo) if tag in _LIVE_TAGS else value


_VIEW_OF = {"dk": "keys", "dv": "values", "di": "items"}


def _content(mine: Any, update: Any, memo: dict) -> Any:
    """What the program left in ``mine`` (a numbered object), from its update, as a new object (not numbered:
    ``mine`` is)."""
    kind = _plain_kind(mine)
    if kind is list:  # its items: the list itself is numbered already (it is ``mine``)
        if type(update) is not list or len(update) > _MAX_ITEMS:
            raise ValueError("a list argument's update is no list")
        return [decode(v, 1, memo) for v in update]
    tag = "d" if kind is dict else "s" if kind is set else None
    if type(update) is not dict or len(update) != 1 or (tag and update.keys() != {tag}):
        raise ValueError("an update of another type than its object")
    ((update_tag, inner),) = update.items()
    try:
        if tag:
            return dict(_pairs(inner, 1, memo)) if kind is dict else set(_hashed(_items(inner, 1, memo)))
        after = _decode_tagged(update_tag, inner, 1, memo)
    except (TypeError, KeyError, IndexError, ArithmeticError) as exc:
        raise ValueError(f"malformed update ({type(exc).__name__})") from None
    if type(after) is not kind or (kind is array.array and after.typecode != mine.typecode):
        raise ValueError("an update of another type than its object")
    return after


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


_MAX_FIELDS, _MAX_CLASSES = 256, 64  # fields of a namedtuple class; classes of an evaluation (~0.1 ms to build each)


def _name(value: Any, field: bool = False) -> str:
    """A valid namedtuple type or field name (``collections.namedtuple``'s own rules, checked before it runs)."""
    if type(value) is not str or not value.isidentifier() or keyword.iskeyword(value) or len(value) > 100:
        raise ValueError("not a name")
    if field and value.startswith("_"):  # (a field name starting with an underscore)
        raise ValueError("not a name")
    return value


def _namedtuple(inner: list, depth: int, memo: dict) -> tuple:
    """A program's namedtuple: [typename, fields, items, class number in the run, module]. In an evaluation (a memo
    with "classes") an instance of a real ``collections.namedtuple`` class, one per class of the run, so ``repr``,
    ``type(a) is type(b)`` and attribute access are CPython's; elsewhere (checking a record's shape) a tuple."""
    name, fields, items = inner[0], inner[1], _items(inner[2], depth, memo)
    number, module = (inner[3], inner[4]) if len(inner) == 5 else (None, None)
    if type(fields) is not list or len(fields) > _MAX_FIELDS or len(set(map(str, fields))) != len(fields):
        raise ValueError("namedtuple fields must be distinct names")
    key = (_name(name), tuple(_name(f, True) for f in fields), module)
    if len(fields) != len(items) or (module is not None and (type(module) is not str or len(module) > 200)):
        raise ValueError("a namedtuple needs one field per value")
    if number is not None and (type(number) is not int or not 0 <= number <= _MAX_ITEMS):
        raise ValueError("a namedtuple class number is a small int")
    if (classes := memo.get("classes")) is None:
        return tuple(items)
    if number not in classes and len(classes) >= _MAX_CLASSES:
        raise ValueError(f"more than {_MAX_CLASSES} namedtuple classes")
    if number not in classes:
        classes[number] = (key, collections.namedtuple(key[0], key[1], module=module or "__main__"))
    if classes[number][0] != key:  # one class, two shapes
        raise ValueError("a namedtuple class changed its shape")
    return tuple.__new__(classes[number][1], items)


# the biggest table a set is rebuilt with (else a ``ProgramOrderSet``), and the slots all rebuilt tables of one
# process may take: an evaluation is a fresh fork of its worker (``eval_worker.py``), so this is one evaluation's
# budget (4 MiB of tables; red team round 12: 128 two-element sets in 32768-slot tables, ~2.9 KB of a record, took
# 64 MB each time the budget was a record's); the trainer rebuilds no table (``any_order``)
_MAX_SLOTS, _SLOTS_LEFT = 1 << 16, [1 << 18]


def _set_in_order(frozen: bool, inner: Any, depth: int, memo: dict, sized: bool = False) -> set | frozenset:
    """A set (or frozenset) iterating, popping and printing in the program's order (``inner``: its elements in that
    order, or ``sized``: [its table's size there, elements]). A real set of the judge's where a table takes that order (the
    elements added in order to a fresh table, or to one of the program's size), else a ``ProgramOrderSet``."""
    if sized and (type(inner) is not list or len(inner) != 2 or type(inner[0]) is not int):
        raise ValueError("a sized set is [table slots, elements]")
    slots, inner = inner if sized else (8, inner)
    at, made = len(memo.get("refs") or ()), None if frozen else _register(set(), memo)  # numbered before its items
    items = _hashed(_items(inner, depth, memo))
    for candidate in _real_sets(frozen, items, slots, made, memo):
        if len(candidate) != len(items):
            raise ValueError("a set's elements repeat")
        if memo.get("any_order") or all(mine is theirs for mine, theirs in zip(candidate, items)):
            return candidate
    ordered = (ProgramOrderFrozenset if frozen else ProgramOrderSet)(items)
    ordered._order = items
    if not frozen:
        memo["refs"][at] = ordered
    return ordered


def _real_sets(frozen: bool, items: list, slots: int, made: set | None, memo: dict):
    """Real sets holding ``items``, built so that they iterate in their order where the table allows it."""
    yield frozenset(items) if frozen else _filled(made, items)
    if memo.get("loose") or memo.get("any_order"):  # the trainer: the program's order is the evaluation's concern
        return
    yield from _reordered(frozen, items, slots, made)
    size = max(slots // 4, 5, len(items))  # a dict of this size presizes an empty set to ``slots`` entries
    if frozen or not 16 <= slots <= min(_MAX_SLOTS, _SLOTS_LEFT[0]) or 2 * size >= slots:
        return
    _SLOTS_LEFT[0] -= slots
    fillers = [object() for _ in range(size - len(items))]  # removed again: they only size the table
    made.clear()
    made.update(dict.fromkeys(items + fillers))
    made.difference_update(fillers)
    yield made


_ARRAY_CODES = {"ar": tuple(array.typecodes), "mv": ("b", "B", "h", "H", "i", "I", "l", "L", "q", "Q", "f", "d")}


def _decode_tagged(tag: str, inner: Any, depth: int, memo: dict) -> Any:
    if (simple := _SIMPLE_TAGS.get(tag)) is not None:
        return simple(inner, depth, memo)
    if tag == "a" and type(inner) is int:  # an object met before in this record (or one of the call's own)
        refs = memo.get("refs", ())
        if memo.get("loose") and inner >= len(refs):  # a shape check without the run's objects
            return _UNKNOWN
        if not 0 <= inner < len(refs):
            raise ValueError("a reference to no object")
        if type(refs[inner]) is weakref.ref:  # an iterator of the program's, alive while the test holds it
            if refs[inner]() is None:
                raise ValueError("a reference to an iterator the test dropped")
            return refs[inner]()
        return refs[inner]
    if tag == "o" and type(inner) is list and len(inner) == 2 and type(inner[0]) is int:  # a returned container
        refs, objects = memo.setdefault("refs", []), memo.setdefault("objects", {})
        at, after = len(refs), decode(inner[1], depth, memo)
        if inner[0] not in objects:
            objects[inner[0]] = after
            return after
        mine = _update(objects[inner[0]], after)  # returned again: the test's object, updated in place
        if at < len(refs) and refs[at] is after:
            refs[at] = mine
        return mine
    if tag == "nan" and type(inner) is list and len(inner) == 2 and type(inner[0]) is int and abs(inner[0]) < 1 << 20:
        # one object per NaN of the run (below 0: one the test passed, ``plain_encode._nan_number``)
        return memo.setdefault("nans", {}).setdefault(inner[0], nan_of(inner[1]))
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
        return items if tag == "ar" else memoryview(items.tobytes()).cast(inner[0])  # over bytes: read-only
    if tag == "sub" and type(inner) is list and len(inner) == 3:  # a subclass instance: its class, texts, value
        texts, value = _items(inner[1], depth, memo), decode(inner[2], depth, memo)
        return subclass_value(memo.get("classes"), inner[0], texts, value, _MAX_CLASSES)
    if tag == "E" and inner == "...":
        return Ellipsis
    if tag == "dq" and type(inner) is list and len(inner) == 2 and (inner[1] is None or type(inner[1]) is int):
        return collections.deque(_items(inner[0], depth, memo), inner[1])
    if tag == "nt" and type(inner) is list and len(inner) in (3, 5):
        return _namedtuple(inner, depth, memo)
    if tag == "q" and type(inner) is list and len(inner) == 2 and all(type(v) in (int, dict) for v in inner):
        numerator, denominator = decode(inner[0], depth, memo), decode(inner[1], depth, memo)
        if type(numerator) is not int or type(denominator) is not int or denominator <= 0:
            raise ValueError("a fraction needs integer parts and a positive denominator")
        if max(numerator.bit_length(), denominator.bit_length()) > _MAX_FRACTION_BITS:
            raise ValueError(f"a fraction part over {_MAX_FRACTION_BITS} bits is no answer")
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
    "s": lambda inner, depth, memo: _set_in_order(False, inner, depth, memo),
    "fs": lambda inner, depth, memo: _set_in_order(True, inner, depth, memo),
    "S": lambda inner, depth, memo: _set_in_order(False, inner, depth, memo, True),  # [table slots, elements]
    "FS": lambda inner, depth, memo: _set_in_order(True, inner, depth, memo, True),
    "d": lambda inner, depth, memo: _filled(_register({}, memo), _pairs(inner, depth, memo)),
    "C": lambda inner, depth, memo: collections.Counter(dict(_pairs(inner, depth, memo))),
    "od": lambda inner, depth, memo: collections.OrderedDict(_pairs(inner, depth, memo)),
    "g": lambda inner, depth, memo: iter(_items(inner, depth, memo)),  # an iterator's items: equal only to itself
    # dict views rebuilt over a dict of their own: real dict_keys/values/items (set-like ==, repr, order)
    "dk": lambda inner, depth, memo: dict.fromkeys(_hashed(_items(inner, depth, memo))).keys(),
    "dv": lambda inner, depth, memo: dict(enumerate(_items(inner, depth, memo))).values(),
    "di": lambda inner, depth, memo: dict(_pairs(inner, depth, memo)).items(),
    "ba": lambda inner, depth, memo: bytearray(base64.b64decode(inner, validate=True)),
    "u": lambda inner, depth, memo: text_of(inner),
    "nb": lambda inner, depth, memo: nan_of(
        inner
    ),  # a NaN of the test's (an argument it changed): its bits  # a str holding surrogates, exactly (``plain_encode``)
}


def _filled(made: Any, items: list) -> Any:
    made.update(items)
    return made


def _update(mine: Any, after: Any) -> Any:
    """``mine`` (an object the test holds), updated in place to what the program left of it (``after``); ``after``
    itself when there is no such object of the same type (a call test's check decodes without a memo)."""
    if (
        mine is None
        or _plain_kind(mine) is not _plain_kind(after)
        or _plain_kind(after) not in _TRACKED | {array.array}
    ):
        return after
    if type(mine) is list or type(mine) is bytearray or type(mine) is array.array:
        mine[:] = after
    elif type(mine) is collections.deque:
        if len(mine) == len(after) and mine.maxlen == after.maxlen:
            _assign_changed(mine, range(len(after)), after)  # item assignment: no mutation for its iterators
        else:
            mine.clear()
            mine.extend(after)
    elif isinstance(mine, dict) and _edits_keep_order(mine, after):
        for key in [key for key in mine if key not in after]:
            del mine[key]
        _assign_changed(mine, list(after), after)  # new keys go last, in the program's order
        if type(mine) is collections.defaultdict:
            mine.default_factory = after.default_factory
    elif not (isinstance(mine, set) and mine == after):  # an unchanged set keeps its table (its order)
        mine.clear()
        mine.update(after)
        if type(mine) is ProgramOrderSet:
            mine._order = list(after)  # the program's order now
        if type(mine) is collections.defaultdict:
            mine.default_factory = after.default_factory
    return mine


def _edits_keep_order(mine: dict, after: dict) -> bool:
    """Whether deleting the keys ``after`` lacks and adding its new ones last gives ``after``'s key order: then
    the change is made key by key, as the program made it (a test's iterator over the dict sees no rebuild)."""
    kept = [key for key in mine if key in after]
    return list(after) == kept + [key for key in after if key not in mine]


def _assign_changed(mine: Any, keys: Any, after: Any) -> None:
    """Set the items of ``after`` at ``keys`` that ``mine`` lacks or holds as other objects."""
    for key in keys:
        if (isinstance(mine, dict) and key not in mine) or mine[key] is not after[key]:
            mine[key] = after[key]
