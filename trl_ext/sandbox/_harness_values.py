"""The values part of the in-sandbox harness's runtime: what a call's result (or exception) becomes on its way to
the judge, and the judge's arguments decoded. ``judge.harness_runtime`` compiles this file and
``_harness_runtime.py`` as one module (this file first), sent in every payload; same rules as there: stdlib C
modules only, no trl_ext import, names captured before the program runs.

Plain data crosses as tagged JSON text, by category rather than by listing types: exact builtin values; a few
standard-library types converted to tagged plain data (Counter, OrderedDict, defaultdict, deque, namedtuples,
Fraction, Decimal, range, bytearray, dict views); any iterator that is builtin or equals only itself, consumed;
a subclass of a builtin value type whose comparisons, hash and item access are all the base's, as its base value.
Identity crosses where ``==`` or a mutation can tell: each NaN object has its number in the run; a record's lists,
dicts and sets are numbered where first met (the call's own arguments first, numbered as the judge numbered them),
so an alias or a cycle is a reference; a call's arguments come back as what each holds now ("upd"), after a raise
too (the judge updates its own objects in place); in an assert test's run the numbers span the run and iterators
stay here (``_harness_live.py``). A subclass or object
whose own code decides ``==`` cannot be encoded: the judge never runs the program's code.
"""

import _collections
import _json
import _struct
import binascii
import builtins

_type, _str_join = type, str.join
_CLASS, _iter = {name: _type.__dict__[name].__get__ for name in ("__dict__", "__mro__", "__flags__")}, iter
_json_ascii = _json.encode_basestring_ascii  # C function, no patchable Python internals
_int_repr, _float_repr = int.__repr__, float.__repr__
_str_isascii, _str_encode, _UnicodeEncodeError = str.isascii, str.encode, UnicodeEncodeError
_ord, _chr, _enumerate, _len = ord, chr, enumerate, len
_repr, _str, _format = repr, str, format
_INF = float("inf")


def _json_str(value):
    """JSON text of a str whose code points the judge's parser gets back exactly: JSON joins an escaped high and
    low surrogate into one astral character, so a str holding any code point U+D800-U+DFFF crosses as
    {"u": [text, code point, ...]} (its runs without surrogates as JSON strings, each surrogate as an int)."""
    if _str_isascii(value):
        return _json_ascii(value)
    try:
        _str_encode(value)  # UTF-8 refuses a surrogate code point, and nothing else
    except _UnicodeEncodeError:
        return _surrogate_text(value)
    return _json_ascii(value)


def _surrogate_text(value):
    parts, start = [], 0
    for at, char in _enumerate(value):
        if "\ud800" <= char <= "\udfff":
            if at > start:
                parts.append(_json_ascii(value[start:at]))
            parts.append(_int_repr(_ord(char)))
            start = at + 1
    if start < _len(value):
        parts.append(_json_ascii(value[start:]))
    return '{"u": [' + _str_join(",", parts) + "]}"


def _b64(data):
    return bytes.decode(binascii.b2a_base64(data, newline=False))


_BIG_INT_BITS = 12000  # beyond ~3600 digits ints travel as hex: int('...') has a 4300-digit limit


def _encode(value, depth=0):
    """Tagged JSON text of plain data, by exact type (a subclass of a builtin is refused): lists are JSON
    arrays, other containers and special numbers single-key tag objects ("t" tuple, "s" set, "fs" frozenset,
    "d" dict as [key, value] pairs, "b" bytes, "c" complex, "f" non-finite float, "i" big int in hex), and a
    few standard-library results are converted to tagged plain data here (``_encode_library``)."""
    if depth > 100:
        raise TypeError("value nested too deeply")
    kind = _type(value)
    if kind is str:
        return _json_str(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        if int.bit_length(value) > _BIG_INT_BITS:
            return '{"i": "' + int.__format__(value, "x") + '"}'
        return _int_repr(value)
    if kind is float:
        if value != value:  # each NaN object by its number in the run (`[x] == [x]` holds for one object only)
            number = _number(_NANS, value)
            _NAN_OBJECTS[number] = value  # by number too: the test may pass it back as an argument
            return '{"nan": [' + _int_repr(number) + ',"' + _nan_bits(value) + '"]}'  # and its bits
        if value in (_INF, -_INF):
            return '{"f": "' + ("inf" if value > 0 else "-inf") + '"}'
        return _float_repr(value)
    if kind is list or kind is dict or kind is set:
        key = id(value)
        seen = _SEEN.get(key)  # met before in this record, or one of the call's arguments: by its number
        if seen is not None:
            return '{"a": ' + _int_repr(seen[0]) + "}"
        _SEEN[key] = (len(_SEEN), value)  # numbered before its items (it may hold itself); kept alive
        return _encode_items(value, depth) if kind is list else _encode_container(value, kind, depth, True)
    if kind is frozenset:
        return _encode_set(value, kind, depth)
    tag = _CONTAINER_TAGS.get(kind)
    if tag is not None:
        return '{"' + tag + '": ' + _encode_items(value, depth) + "}"
    if kind is bytes:
        return '{"b": "' + _b64(value) + '"}'
    if kind is complex:
        return '{"c": [' + _encode(value.real, depth + 1) + "," + _encode(value.imag, depth + 1) + "]}"
    return _encode_library(value, kind, depth)


def _nan_bits(value):
    """A NaN's 64 bits as 16 hex digits, big-endian (its sign and payload: ``copysign`` and ``struct`` read them)."""
    return bytes.hex(_struct.pack(">d", value))


def _encode_items(values, depth):
    return "[" + _str_join(",", [_encode(v, depth + 1) for v in values]) + "]"


def _number(table, value):
    """The number of ``value`` (a NaN, a returned container) in this run, by identity."""
    if id(value) not in table:
        table[id(value)] = len(table)
        _KEEP.append(value)  # alive for the whole run: its id is never reused
    return table[id(value)]


def _encode_container(value, kind, depth, sized=False):
    if kind is dict:
        return '{"d": ' + _encode_pairs(dict.items(value), depth) + "}"
    return _encode_set(value, kind, depth) if sized else '{"s": ' + _encode_items(value, depth) + "}"


def _encode_set(value, kind, depth):
    """A set or frozenset: its elements in its iteration order and the size of its table (what decides that order
    and ``pop()``'s), so that the judge rebuilds one that iterates as this one does."""
    slots = (kind.__sizeof__(value) - _SET_SIZE) // 16  # a table of its own beyond the 8 built-in entries
    tag = '{"S": [' if kind is set else '{"FS": ['
    return tag + _int_repr(slots if slots > 8 else 8) + "," + _encode_items(value, depth) + "]}"


def _encode_pairs(pairs, depth):
    items = [_encode(k, depth + 1) + "," + _encode(v, depth + 1) for k, v in pairs]
    return "[" + _str_join(",", ["[" + item + "]" for item in items]) + "]"


_MAX_ITEMS = 100000  # items taken from a generator or iterator; a longer one is not plain data


def _encode_library(value, kind, depth):
    """Counter, OrderedDict, defaultdict, deque, namedtuples, Fraction, range, generators and builtin iterators
    as tagged plain data (the judge rebuilds the same standard types; only the program's answer crosses); one of
    the call's own arguments (a deque, a bytearray...) by its number."""
    seen = _SEEN.get(id(value))
    if seen is not None:
        return '{"a": ' + _int_repr(seen[0]) + "}"
    if _LIVE_RUN:  # noqa: F821 - an assert test's run: iterators stay in the sandbox (_harness_live.py)
        return _live_library(value, kind, depth)  # noqa: F821
    return _library_text(value, kind, depth)  # noqa: F821 - _harness_library.py, compiled into the same module


_REPLAYED_ONLY = (
    "__bool__",
    "__len__",
    "__contains__",
    "__getitem__",
    "__length_hint__",
    "__reversed__",
    "send",
    "throw",
)


def _plain_iterator(value, kind):
    """Whether ``value`` crosses as an iterator (the judge replays only next() and its end): a builtin one, or one
    of the program's classes that equals only itself, whose ``__iter__`` gives itself and that defines nothing
    else a test could call (truth, len, ``in``, indexing, send/throw): else it is no plain data."""
    if _special(kind, "__next__") is None:
        return False
    if not _CLASS["__flags__"](kind) & _HEAPTYPE:
        return True
    if _special(kind, "__eq__") is not object.__eq__:
        return False
    if any(name in _CLASS["__dict__"](k) for k in _CLASS["__mro__"](kind)[:-1] for name in _REPLAYED_ONLY):
        raise TypeError("an iterator of the program with more than __iter__ and __next__")
    if _special(kind, "__iter__") is None or _iter(value) is not value:
        raise TypeError("an iterator of the program whose __iter__ does not give itself")
    return True


def _special(kind, name):
    """``name`` as ``iter()``, ``next()`` and ``==`` find it: in the MRO's dicts (no metaclass property hides it)."""
    return next((d.get(name) for d in map(_CLASS["__dict__"], _CLASS["__mro__"](kind)) if name in d), None)


_CLASSES = {}  # the namedtuple classes met, by number in the run (``_harness_library._library_text``)


def _factory(factory, depth):
    """A defaultdict's factory: a builtin type by name, else (a lambda) the value it makes, which the judge makes
    anew from its plain data on every missing key; null when there is none or its value is no plain data."""
    if factory in _FACTORIES:
        return '"' + factory.__name__ + '"'
    if factory is None:
        return "null"
    global _SEEN
    seen, _SEEN = _SEEN, {}  # the judge decodes the value alone, once per missing key: numbered on its own
    try:
        made, again = factory(), factory()
        text = _encode(made, depth + 1)
    except BaseException:  # noqa: B036 - the program's factory failed: the dict keeps no factory
        return "null"
    finally:
        _SEEN = seen
    if made is again and _type(made) not in _SCALARS:  # one object for every missing key (a change to one shows
        raise TypeError("a defaultdict factory returning one shared object")  # in all): no plain data
    return '{"v": ' + text + "}"


_SCALARS = (int, float, complex, str, bytes, bool, _type(None))


def _value_base(kind):
    """The builtin value type a subclass (an IntEnum, a str subclass...) keeps every behaviour of, so that the
    judge's copy of the base value behaves as CPython's original does; None if the subclass's own code decides
    any method of the base (comparisons, hash, item access, ``get``, iteration, mutation...) or ``__missing__``.
    Only ``repr``, ``str`` and ``format`` (their texts cross: ``_subclass_text``) and pickling may be its own."""
    base, mro = next((k for k in _CLASS["__mro__"](kind) if k in _BASE_COPY), None), _CLASS["__mro__"](kind)
    for method in _behaviour(base) if base is not None else ():
        owner = next((k for k in mro if method in _CLASS["__dict__"](k)), object)  # as a metaclass cannot hide
        if _CLASS["__flags__"](owner) & _HEAPTYPE:
            return None
    return base


def _subclass_text(value, kind, base, depth):
    """'{"sub": [[class number, name, qualname, keeps the base's __format__], [repr, str, format(x, "")], base
    value]}': a subclass instance as its base value (read from its storage) with the texts its own ``repr``,
    ``str`` and ``__format__`` give here (null where one raised or gave no str; the format text only where the
    class has its own ``__format__``): the judge makes an instance of one class per class of the run with them."""
    name, qualname = (_json_str(type.__dict__[n].__get__(kind)) for n in ("__name__", "__qualname__"))
    plain_format = _special(kind, "__format__") is _special(base, "__format__")
    texts = [_own_text(_repr, value), _own_text(_str, value), "null" if plain_format else _own_text(_format, value)]
    head = '{"sub": [[' + _int_repr(_number(_CLASSES, kind)) + "," + name + "," + qualname + ","
    head += ("true" if plain_format else "false") + "],[" + _str_join(",", texts) + "],"
    return head + _encode(_BASE_COPY[base](value), depth + 1) + "]}"


def _own_text(function, value):
    try:
        return _json_str(str.__str__(function(value)))  # the program's method, run here: an exact str, or null
    except BaseException:  # noqa: B036
        return "null"


def _behaviour(base):
    """The methods of ``base`` a subclass must not override to cross as its base value (computed once a type)."""
    names = _BEHAVIOUR.get(base)
    if names is None:
        names = _BEHAVIOUR[base] = [n for n in dir(base) if n not in _NOT_BEHAVIOUR] + ["__missing__", "__getattr__"]
    return names


_NOT_BEHAVIOUR = frozenset(dir(object)) - {"__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__hash__"}
_NOT_BEHAVIOUR = (_NOT_BEHAVIOUR | {"__getnewargs__", "__class_getitem__"}) - {"__getattribute__"}


_CONTAINER_TAGS = {tuple: "t"}
_SET_SIZE = set.__sizeof__(set())  # a set with no table of its own (frozensets have the same layout)
_FACTORIES = (int, float, str, list, dict, set, tuple, bool, bytes, frozenset)
_ARRAY_CODES = ("b", "B", "h", "H", "i", "I", "l", "L", "q", "Q", "f", "d")
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made at run time (by the program); builtin types are static
_VIEWS = {_type({}.keys()): "dk", _type({}.values()): "dv", _type({}.items()): "di"}
_BEHAVIOUR = {}  # base type -> the names of its methods a crossing subclass keeps (``_behaviour``)
_BASE_COPY = {  # the exact base value of a subclass instance, read from its storage (no method it could override)
    int: lambda v: int.__add__(v, 0),
    float: float.__float__,
    complex: complex.__complex__,
    str: str.__str__,
    bytes: bytes.__bytes__,
    bytearray: bytearray.copy,
    tuple: lambda v: tuple.__getitem__(v, slice(None)),
    list: list.copy,
    dict: dict.copy,
    set: set.copy,
    frozenset: frozenset.copy,
}
# NaN objects and returned containers seen in this run (kept alive: ids stay theirs); the lists, dicts and sets of
# the record being written, {id: (number, object)} (see _call_record)
_NANS, _OBJECTS, _KEEP, _SEEN, _NAN_OBJECTS = {}, {}, [], {}, {}  # and the NaNs by number


def _decode_call(args, kwargs, made):
    """The arguments and keyword arguments of one call from the judge's ``encode_call``; its lists, dicts and sets
    are appended to ``made`` in the judge's numbering (where each begins), so an alias is one object here too."""
    return [_decode(v, made) for v in args], {_decode(k, made): _decode(v, made) for k, v in kwargs["d"]}


def _decode(value, made):
    """Inverse of the judge's ``encode`` on parsed JSON (trusted: the judge's). Runs in the calls child after the
    program has loaded, one call at a time: a program that patches what it uses spoils only its own results."""
    if _type(value) is list:
        items = _made([], made)
        items.extend([_decode(v, made) for v in value])
        return items
    if _type(value) is not dict:
        return value
    ((tag, inner),) = value.items()
    if tag == "a":
        return made[inner]
    if tag == "t":
        return tuple([_decode(v, made) for v in inner])
    if tag == "s":
        items = _made(set(), made)
        items.update([_decode(v, made) for v in inner])
        return items
    if tag == "fs":
        return frozenset([_decode(v, made) for v in inner])
    if tag == "d":
        items = _made({}, made)
        for k, v in inner:
            items[_decode(k, made)] = _decode(v, made)
        return items
    if tag in _MUTABLE_ARGUMENTS:  # a library value the program may change in place, numbered like a list
        return _decode_library(tag, inner, made)
    if tag == "b":
        return binascii.a2b_base64(inner)
    if tag == "c":
        return complex(_decode(inner[0], made), _decode(inner[1], made))
    if tag == "f":
        return float(inner)
    if tag == "nb":  # a NaN with its sign and payload; in an assert test's run [bits, its number]: one object
        return _nan_argument(inner) if _type(inner) is list else _struct.unpack(">d", bytes.fromhex(inner))[0]
    if tag == "i":
        return int(inner, 16)
    if tag == "u":  # a str holding surrogates (``plain_encode``): its runs and code points, joined
        return _str_join("", [part if _type(part) is str else _chr(part) for part in inner])
    raise ValueError("unknown tag " + repr(tag))


def _nan_argument(inner):
    """The NaN object of number ``inner[1]`` in the run (one the program returned, or one of the test's, numbered
    below 0 by the judge), made from its bits where first met: returned again, it is the test's same object."""
    bits, number = inner
    known = _NAN_OBJECTS.get(number)
    if known is None:
        known = _NAN_OBJECTS[number] = _struct.unpack(">d", bytes.fromhex(bits))[0]
        _NANS[id(known)] = number
        _KEEP.append(known)
    return known


def _decode_library(tag, inner, made):
    """A deque, bytearray, Counter, OrderedDict or defaultdict argument (``_collections`` is a C module; Counter
    is the one ``_harness_library.py`` captured when the harness loaded)."""
    if tag == "ba":
        return _made(bytearray(binascii.a2b_base64(inner)), made)
    if tag == "dq":
        items = _made(_collections.deque((), inner[1]), made)
        items.extend([_decode(v, made) for v in inner[0]])
        return items
    if tag == "dd":
        factory, inner = inner[0] and next(f for f in _FACTORIES if f.__name__ == inner[0]), inner[1]
        items = _made(_collections.defaultdict(factory), made)
    else:
        items = _made(_collections.OrderedDict() if tag == "od" else _COUNTER(), made)  # noqa: F821
    for k, v in inner:
        items[_decode(k, made)] = _decode(v, made)
    return items


_MUTABLE_ARGUMENTS = ("ba", "dq", "dd", "od", "C")


def _made(value, made):
    made.append(value)
    if made is _LIVE:  # noqa: F821 - an assert test's run: numbered for the whole run (_harness_live.py)
        _SEEN[id(value)] = (len(_SEEN), value)
    return value


def _exception_name(exc):
    """Name of the first builtin exception class ``exc`` derives from (the judge re-raises that class)."""
    try:
        for klass in _type(exc).__mro__:
            if _BUILTIN_EXCEPTIONS.get(klass.__name__) is klass:
                return klass.__name__
    except BaseException:  # noqa: B036 - a hostile metaclass: any name it could fake, it could also raise
        return "Exception"
    return "Exception"


_BUILTIN_EXCEPTIONS = {
    name: value
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
}


def _call_record(fn, args, kwargs, want_args, made):
    """(record body, whether the call returned plain data) of one call (the harness adds the case index). With
    ``want_args``, the call's lists, dicts and sets (``made``, numbered as the judge numbers its own) travel back:
    "upd" holds what each holds now, after a raise too, and the value or the exception's arguments name them by
    number where they hold them, so the judge updates its own objects in place and keeps their identity."""
    try:
        value, raised = fn(*args, **kwargs), None
    except BaseException as exc:  # noqa: B036 - SystemExit in a call is that call's failure
        value, raised = None, exc
    try:
        record = '{"ok": true' if raised is None else '{"ok": false, "raised": "' + _exception_name(raised) + '"'
        if want_args:  # in-place changes to the arguments, which the judge applies to its own objects
            for v in made:
                _SEEN[id(v)] = (len(_SEEN), v)
            record += ', "upd": [' + _str_join(",", [_content(v) for v in made]) + "]"
        if raised is not None:
            return record + _exception_args(raised) + "}", False
        kind, returned_before = _type(value), id(value) in _SEEN
        text = _encode(value)
        if (kind is list or kind is dict or kind is set) and not returned_before:  # returned again later, it is
            text = '{"o": [' + _int_repr(_number(_OBJECTS, value)) + "," + text + "]}"  # the judge's same object
        return record + ', "value": ' + text + "}", True
    except BaseException:  # noqa: B036
        return '{"ok": false, "unencodable": true}', False
    finally:
        _SEEN.clear()


def _content(value):
    """What one of the call's arguments holds (the judge's ``plain_data._content`` reads it)."""
    kind = _type(value)
    if kind is list:
        return _encode_items(value, 0)
    return _encode_container(value, kind, 0) if kind is dict or kind is set else _library_text(value, kind, 0)  # noqa: F821


def _exception_args(exc):
    """The exception's arguments, when they are plain data (the judge raises it with them: ``str(e)`` too), its
    program classes and its builtin attributes (``_harness_program._exception_extra``)."""
    numbered = len(_SEEN)
    try:
        text = ', "exc": ' + _encode(list(BaseException.args.__get__(exc)))
    except BaseException:  # noqa: B036 - no plain data: nothing half-numbered stays (attributes follow)
        for key in list(_SEEN)[numbered:]:
            del _SEEN[key]
        text = ""
    return text + _exception_extra(exc)  # noqa: F821 - in _harness_program.py, compiled into the same module
