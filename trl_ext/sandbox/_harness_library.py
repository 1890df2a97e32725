"""The standard-library types the harness converts to tagged plain data, recognised by class identity.
``judge.harness_runtime`` compiles this file right after ``_harness_values.py``, as one module; same rules.

The real classes (Counter, OrderedDict, defaultdict, deque, Decimal, Fraction, array and the methods
``collections.namedtuple`` generates) are captured when the harness loads, before the program runs: a program class
that only claims a library name (``__module__ = 'collections'``, ``__qualname__ = 'Counter'``), or a program that
replaces ``sys.modules['collections']`` or its attributes, cannot make its own class cross as the library type (its
own ``__eq__`` would be skipped by the judge); such a class crosses as what it is, a program class.
"""

# imported here, not where a result needs them: the classes must be the real ones, never what the program left in
# sys.modules (a fork server pays this once; a per-run launch pays it on every run)
import array as _array_module
import collections as _collections_module
import decimal as _decimal_module
import fractions as _fractions_module

if False:  # never runs: ``judge.harness_runtime`` compiles this file with _harness_values.py as one module
    from trl_ext.sandbox._harness_values import (
        _ARRAY_CODES,
        _BASE_COPY,
        _CLASS,
        _CLASSES,
        _MAX_ITEMS,
        _VIEWS,
        _b64,
        _behaviour,
        _collections,
        _encode,
        _encode_items,
        _encode_pairs,
        _factory,
        _int_repr,
        _json_str,
        _number,
        _plain_iterator,
        _special,
        _str_join,
        _subclass_text,
        _type,
        _value_base,
    )

_COUNTER, _ORDERED_DICT = _collections_module.Counter, _collections_module.OrderedDict
_DEFAULTDICT, _DEQUE = _collections_module.defaultdict, _collections_module.deque
_DECIMAL, _FRACTION, _ARRAY = _decimal_module.Decimal, _fractions_module.Fraction, _array_module.array
_REFERENCE = _collections_module.namedtuple("Reference", "a")  # the generated methods, for _namedtuple_fields
_GENUINE = {k: getattr(v, "__func__", v) for k, v in _CLASS["__dict__"](_REFERENCE).items()}
_METHOD_WRAPPERS = (classmethod, staticmethod)
_IMMUTABLE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE: a class whose attributes nobody can set (C types)


def _class_dicts(kind):
    """(class, a copy of its dict) for each class of ``kind``'s MRO whose attributes a program can set."""
    return [
        (k, dict(_CLASS["__dict__"](k))) for k in _CLASS["__mro__"](kind) if not _CLASS["__flags__"](k) & _IMMUTABLE
    ]


_AS_LOADED = {kind: _class_dicts(kind) for kind in (_COUNTER, _ORDERED_DICT, _FRACTION)}


def _require_as_loaded(value, kind):
    """Refuse a library value whose class the program changed since the harness loaded (``Counter.__eq__ = ...``,
    ``numbers.Number.__ne__ = ...``) or that holds attributes of its own (``od.keys = ...``): the judge would
    answer with the library's methods where CPython runs the program's."""
    for klass, loaded in _AS_LOADED[kind]:
        now = _CLASS["__dict__"](klass)
        if len(now) != len(loaded) or any(now.get(name) is not item for name, item in loaded.items()):
            raise TypeError("a library class the program changed")
    slot = _special(kind, "__dict__")  # the instance's own attributes (read through the class, as loaded)
    if slot is not None and slot.__get__(value):
        raise TypeError("a library value with attributes of its own")
    _watch_library(kind, value if slot is not None else None, slot)


_CROSSED = {}  # library class -> its MRO's dicts when its first value crossed (as loaded: _AS_LOADED)
_CROSSED_VALUES = []  # (value, its class's __dict__ slot): crossed values that may gain attributes of their own
_MAX_CROSSED = 256  # values watched; a record past them is unencodable (the program fails that call)
_CROSSED_SUBCLASS = {}  # id -> (a builtin-subclass value that crossed, its class then): ``type()`` is not guarded
_MAX_CROSSED_SUBCLASS = 4096  # judge-side (``program_sets``), so a swapped ``__class__`` must fail the call


def _watch_library(kind, value, slot):
    """Keep what a later call must not change in a library value that crossed (red team R9-1b): the judge's
    copy answers with the class as it was (a namedtuple class rebuilt, the judge's own Counter)."""
    if kind not in _CROSSED:
        _CROSSED[kind] = _AS_LOADED.get(kind) or _class_dicts(kind)
    if value is not None and all(kept is not value for kept, _ in _CROSSED_VALUES):
        if len(_CROSSED_VALUES) >= _MAX_CROSSED:
            raise TypeError("too many library values to watch")
        _CROSSED_VALUES.append((value, slot))


def _library_changed():
    """Whether a call changed the class of a library value that crossed before (``P.__repr__ = ...``,
    ``Counter.most_common = ...``, a namedtuple field made a property), gave such a value attributes of its own,
    or swapped the ``__class__`` of a builtin-subclass value that crossed (``type(x).__name__``): the test's copy
    would answer as before, so the call that changed it cannot be answered (its record is unencodable: the
    program fails it). Classes are compared by the identity of every attribute."""
    for dicts in _CROSSED.values():
        for klass, kept in dicts:
            now = _CLASS["__dict__"](klass)
            if len(now) != len(kept) or any(now.get(name) is not item for name, item in kept.items()):
                return True
    if any(_type(value) is not kind for value, kind in _CROSSED_SUBCLASS.values()):
        return True
    return any(slot.__get__(value) for value, slot in _CROSSED_VALUES)


def _library_text(value, kind, depth):
    """A library value by its exact class (one captured at load); else an iterator, else a builtin's subclass."""
    if kind is _COUNTER or kind is _ORDERED_DICT:
        _require_as_loaded(value, kind)
        # an OrderedDict's order is its linked list (move_to_end), not its dict's: its own C items()
        pairs = _ORDERED_DICT.items(value) if kind is _ORDERED_DICT else dict.items(value)
        return '{"' + ("C" if kind is _COUNTER else "od") + '": ' + _encode_pairs(pairs, depth) + "}"
    if kind is _DEFAULTDICT:
        return (
            '{"dd": [' + _factory(value.default_factory, depth) + "," + _encode_pairs(dict.items(value), depth) + "]}"
        )
    view = next((_VIEWS[k] for k in _CLASS["__mro__"](kind) if k in _VIEWS), None)  # dict_keys/values/items
    if view is not None:
        return '{"' + view + '": ' + (_encode_pairs if view == "di" else _encode_items)(list(value), depth) + "}"
    if kind is bytearray:
        return '{"ba": "' + _b64(value) + '"}'
    if kind is _DECIMAL:
        return '{"dec": ' + _json_str(kind.__str__(value)) + "}"
    if kind is _DEQUE:
        maxlen = "null" if value.maxlen is None else _int_repr(value.maxlen)
        return '{"dq": [' + _encode_items(list(value), depth) + "," + maxlen + "]}"
    if isinstance(value, tuple) and _namedtuple_fields(value, kind) is not None:
        _watch_library(kind, None, None)
        fields = _str_join(",", [_json_str(f) for f in kind._fields])
        head = '{"nt": [' + _json_str(kind.__name__) + ",[" + fields + "],"
        tail = "," + _int_repr(_number(_CLASSES, kind)) + "," + _json_str(kind.__dict__["__module__"]) + "]}"
        return head + _encode_items(tuple.__iter__(value), depth) + tail
    if kind is _FRACTION:
        _require_as_loaded(value, kind)
        return '{"q": [' + _encode(value.numerator, depth + 1) + "," + _encode(value.denominator, depth + 1) + "]}"
    if kind is range:
        return (
            '{"r": [' + _str_join(",", [_encode(v, depth + 1) for v in (value.start, value.stop, value.step)]) + "]}"
        )
    if _plain_iterator(value, kind):
        items = []  # an iterator (builtin, or one that equals only itself): its items, as a judge-side iterator
        for item in value:
            if len(items) >= _MAX_ITEMS:
                raise TypeError("too many items")
            items.append(item)
        return '{"g": ' + _encode_items(items, depth) + "}"
    if kind is _ARRAY:
        return '{"ar": [' + _json_str(value.typecode) + "," + _encode_items(value.tolist(), depth) + "]}"
    if kind is memoryview and value.ndim == 1 and value.format in _ARRAY_CODES and _type(value.obj) is bytes:
        return '{"mv": [' + _json_str(value.format) + "," + _encode_items(value.tolist(), depth) + "]}"
    if value is Ellipsis:
        return '{"E": "..."}'
    base = _value_base(kind)
    if base is None or _own_attributes_shadow(value, kind, base) or _class_not_rebuilt(kind, base):
        raise TypeError("not plain data")
    if id(value) not in _CROSSED_SUBCLASS:  # kept, by id: a later call must not swap its __class__
        if len(_CROSSED_SUBCLASS) >= _MAX_CROSSED_SUBCLASS:
            raise TypeError("too many subclass values to watch")
        _CROSSED_SUBCLASS[id(value)] = (value, kind)
    return _subclass_text(value, kind, base, depth)


_GETSET, _dict_iter = _type(BaseException.__dict__["args"]), dict.__iter__  # an instance dict's C getter's type
_get_slot, _BASE_NAMES = _GETSET.__get__, {base: frozenset(dir(base)) for base in _BASE_COPY}


def _own_attributes_shadow(value, kind, base):
    """Whether the instance's own attributes may answer a read the judge answers from ``base``: an instance
    attribute named like one of the base's (``s.upper = ...``) wins over the class's method in CPython (red team
    R8b-3); also True where the instance dict cannot be read as surely as that (a class's own ``__dict__``)."""
    slot = next((d["__dict__"] for d in map(_CLASS["__dict__"], _CLASS["__mro__"](kind)) if "__dict__" in d), None)
    if slot is None:  # no instance dict (slots only: a slot named like a base method is the class's, seen there)
        return False
    try:
        own = _get_slot(slot, value, kind) if _type(slot) is _GETSET else None
    except BaseException:  # noqa: B036
        return True
    names = _BASE_NAMES[base]
    return _type(own) is not dict or any(_type(n) is not str or n in names for n in _dict_iter(own))


def _class_not_rebuilt(kind, base):
    """Whether the judge's class for ``kind`` would answer ``type(x).__module__`` or ``__slots__`` otherwise than
    the program's (red team R9-10): it is a class of ``__main__`` with no ``__slots__`` of its own."""
    if _CLASS["__dict__"](kind).get("__module__") != "__main__":
        return True
    mro = _CLASS["__mro__"](kind)
    return any("__slots__" in _CLASS["__dict__"](k) for k in mro[: mro.index(base)])


def _namedtuple_fields(value, kind):
    """The fields of a class made by ``collections.namedtuple`` (or ``typing.NamedTuple``) whose every behaviour
    is the generated one (so the judge's namedtuple of the same name and fields behaves as it does: ``repr``,
    ``str``, attribute access, ``_asdict``...); None for anything else (a subclass, an override)."""
    if _type(kind) is not type or kind.__bases__ != (tuple,):
        return None
    fields = kind.__dict__.get("_fields")
    if _type(fields) is not tuple:
        return None
    if len(fields) != tuple.__len__(value) or _type(kind.__dict__.get("__module__")) is not str:
        return None
    for name in _behaviour(tuple) + ["__repr__", "__str__", "__format__", "_asdict", "_replace", "_make"]:
        mine = kind.__dict__.get(name)
        if mine is None:
            continue
        mine, reference = mine.__func__ if _type(mine) in _METHOD_WRAPPERS else mine, _GENUINE.get(name)
        if _type(mine) is not _type(_b64) or getattr(reference, "__code__", None) is not mine.__code__:
            return None
    for index, field in enumerate(fields):
        getter = kind.__dict__.get(field) if _type(field) is str else None
        if _type(getter) is not _collections._tuplegetter or getter.__reduce__()[1][0] != index:
            return None
    return fields
