"""Live objects of an assert test's run, the harness's side (``replay._Session`` is the judge's). Compiled with
``_harness_values.py`` (before it) and ``_harness_runtime.py`` (after it) as one module; same rules as there.

In one interpreter the test and the program share their objects for the whole test. Here every list, dict, set,
deque, bytearray, Counter, OrderedDict, defaultdict and array that crossed, in either direction, keeps its number
for the whole run (``_SEEN`` is not cleared between an assert test's calls) and the judge keeps one object per
number. Each call (a frame [name, args, kwargs, sync]) carries what the TEST changed in numbered objects since the
last record ("sync", applied here before the call); each record carries the contents of every numbered object
whose contents changed during the call ("upd": [number, contents]), found by comparing a snapshot of each
object's slots by identity (a nested container is numbered itself, so its own change is its own entry). An
iterator the program returns stays here, numbered (its record holds its classes, ``_iterator_classes``): the
judge's iterator asks for each item as a call of the run (name ""), so what a generator reads lazily, its side
effects and its exceptions come when the test asks.
"""

import _operator
import _weakref
import builtins  # the module itself: a program may put another in sys.modules
import gc
import sys

if False:  # never runs: ``judge.harness_runtime`` compiles this file with _harness_values.py as one module
    from trl_ext.sandbox._harness_library import _library_text
    from trl_ext.sandbox._harness_program import _MAX_CHAIN, _ORIGINAL_BUILTINS
    from trl_ext.sandbox._harness_values import (
        _CLASS,
        _CLASSES,
        _HEAPTYPE,
        _SEEN,
        _VIEWS,
        _collections,
        _content,
        _decode,
        _decode_call,
        _encode,
        _exception_args,
        _exception_name,
        _int_repr,
        _json_str,
        _len,
        _number,
        _plain_iterator,
        _str_join,
        _type,
    )

_is, _refcount, _referents = _operator.is_, sys.getrefcount, gc.get_referents
_weakcount = _weakref.getweakrefcount


def _unheld():
    """The reference count of a numbered object nothing but the harness holds (``_SEEN`` and ``_LIVE``): a call
    cannot change such an object (not without reaching into the harness through the garbage collector, which
    spoils only its own results, as patching does), so it is not compared after the call."""
    probe = [[]]
    held = (0, probe[0])  # noqa: F841 - as _SEEN holds it
    return _refcount(probe[0])


_UNHELD = _unheld()
_LIVE = []  # the run's numbered objects by number (the order in which _SEEN numbered them)
_SNAPS = []  # the snapshot of each (None: an iterator, whose contents never cross)
_LIVE_RUN = []  # [True] once the run is an assert test's: numbers then span the run


def _live_objects():
    if len(_LIVE) < len(_SEEN):
        _LIVE.extend([entry[1] for entry in list(_SEEN.values())[len(_LIVE) :]])
    return _LIVE


def _snapshot(value):
    """What ``value`` holds, by identity (an item that is the same object is the same value or is numbered)."""
    kind = _type(value)
    if kind is list or kind is _collections.deque:
        return tuple(value)
    if kind is bytearray:
        return bytes(value)
    if kind is set:
        return frozenset(map(id, value)), tuple(value)  # the items keep their ids
    if isinstance(value, dict):
        return tuple(value), tuple(dict.values(value)), getattr(value, "default_factory", None)
    if _type(getattr(value, "typecode", None)) is str and kind.__module__ == "array":
        return value.typecode + value.tobytes().hex()
    return None


def _unchanged(value, snap):
    kind = _type(value)
    if snap is None or kind is bytearray:
        return snap is None or snap == value
    if _type(snap) is str:  # an array
        return snap == value.typecode + value.tobytes().hex()
    if kind is set:
        return len(value) == len(snap[1]) and frozenset(map(id, value)) == snap[0]
    if isinstance(value, dict):
        keys, values = snap[0], snap[1]
        return (
            len(value) == len(keys)
            and all(map(_is, value, keys))
            and all(map(_is, dict.values(value), values))
            and getattr(value, "default_factory", None) is snap[2]
        )
    return len(value) == len(snap) and all(map(_is, value, snap))


def _live_library(value, kind, depth):
    """A library value in an assert test's record: an iterator stays here (the judge steps it by number); a
    mutable library object is numbered after its contents (the judge numbers it after decoding them)."""
    if _plain_iterator(value, kind):  # numbered where met, as the judge numbers it (the number is not sent: a
        # call's record must not change with the calls before it, ``records.RunHistory``)
        # a generator: one class in CPython; an ended one runs nothing when asked for more
        text = '{"gen": null}' if kind is _GENERATOR else '{"gc": ' + _iterator_classes(kind) + "}"
        _SEEN[id(value)] = (len(_SEEN), value)
        return text
    view = next((_VIEWS[k] for k in _CLASS["__mro__"](kind) if k in _VIEWS), None)  # no metaclass answers
    mapping = _referents(value) if view is not None else ()
    if len(mapping) == 1 and isinstance(mapping[0], dict):  # a view of a dict that lives on: over that dict
        return '{"lv": ["' + view + '", ' + _encode(mapping[0], depth + 1) + "]}"
    text = _library_text(value, kind, depth)
    if text.startswith(_LIVE_TAGS):  # the value itself, not a copy of its base (as the judge numbers by tag)
        _SEEN[id(value)] = (len(_SEEN), value)
    return text


def _iterator_classes(kind):
    """[[name, qualname, module, number], ...]: the class of a program's iterator, its own entry first, then the
    program's classes of its MRO (so the judge's class subclasses theirs), each with its number in the run (one
    table with exception and namedtuple classes: ``_number_module_classes``); a builtin iterator type is one entry
    with no number (the judge keys it by module and qualname). Read through ``type``'s own descriptors: a
    metaclass cannot show the judge another class's name or MRO."""
    flags = _type.__dict__["__flags__"].__get__
    heap = flags(kind) & _HEAPTYPE
    mro = _type.__dict__["__mro__"].__get__(kind) if heap else ()
    bases = [k for k in mro if k is not kind and flags(k) & _HEAPTYPE]
    if len(bases) >= _MAX_CHAIN:
        raise TypeError("iterator classes nested too deeply")
    return "[" + _str_join(",", [_class_entry(k, heap) for k in [kind] + bases]) + "]"


# members of an iterator class the judge's class stands for: what they do crosses (items, instance attributes refused)
_ITERATOR_MEMBERS = frozenset({"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__annotations__"})
_ITERATOR_MEMBERS |= {"__iter__", "__next__", "__init__"}


def _class_entry(klass, numbered):
    """[name, qualname, module, number] of a builtin iterator type (number null); of a program class also its
    direct bases ([another entry's number, "object", or null where the judge cannot rebuild it: a builtin base
    but object, a metaclass]) and whether it defines more than ``_ITERATOR_MEMBERS`` (the judge refuses what the
    test reads of those: ``live.iterator_class``)."""
    name, qualname, module = (_type.__dict__[n].__get__(klass) for n in ("__name__", "__qualname__", "__module__"))
    module = _json_str(module) if _type(module) is str else "null"
    head = "[" + _json_str(name) + "," + _json_str(qualname) + "," + module + ","
    if not numbered:
        return head + "null]"
    flags = _type.__dict__["__flags__"].__get__
    bases = ["null"]
    if _type(klass) is _type:  # exactly ``type``: no metaclass hook answers isinstance its own way
        bases = [
            '"object"' if base is object else _int_repr(_number(_CLASSES, base)) if flags(base) & _HEAPTYPE else "null"
            for base in _type.__dict__["__bases__"].__get__(klass)
        ]
    members = _type.__dict__["__dict__"].__get__(klass)
    own = any(_type(key) is not str or key not in _ITERATOR_MEMBERS for key in members)
    number = _int_repr(_number(_CLASSES, klass))
    return head + number + ",[" + _str_join(",", bases) + "]," + ("true" if own else "false") + "]"


def _generator_type():
    yield


_GENERATOR = _type(_generator_type())
_LIVE_TAGS = ('{"ba"', '{"dq"', '{"C"', '{"od"', '{"dd"', '{"ar"')  # plain_data._LIVE_TAGS


def _synced(target, contents, live):
    """What the test left in ``target`` (a numbered object), decoded from the judge's contents."""
    kind = _type(target)
    if kind is list or kind is _collections.deque:
        items = contents["dq"][0] if kind is _collections.deque else contents
        return [_decode(v, live) for v in items]
    if kind is set:
        return [_decode(v, live) for v in contents["s"]]
    if kind is bytearray:
        return _decode({"b": contents["ba"]}, live)
    ((tag, inner),) = contents.items()
    if tag == "ar":
        return _type(target)(target.typecode, [_decode(v, live) for v in inner[1]])
    pairs = inner[1] if tag == "dd" else inner
    return [(_decode(k, live), _decode(v, live)) for k, v in pairs]


def _overwrite(target, items):
    if isinstance(target, dict) or _type(target) is set:
        target.clear()
        target.update(items)
    elif _type(target) is _collections.deque:
        target.clear()
        target.extend(items)
    else:
        target[:] = items


def _release(number):
    """Drop the run's reference to an iterator the test dropped: unless the program holds it, it is freed here and
    then (a generator's ``finally`` runs, as in one interpreter). Its number stays taken."""
    value = _LIVE[number]
    if _SNAPS[number] is not None or _SEEN.get(id(value), (None, None))[1] is not value:
        raise TypeError("not an iterator of the run")
    _LIVE[number] = None
    del _SEEN[id(value)]
    _SEEN[-1 - number] = (number, None)  # (an id is never negative): the count of numbers stays
    del value


def _close(number):
    """The test called ``close()`` on the generator ``number``: what its clean-up raises is the call's exception."""
    value = _LIVE[number]
    if _type(value) is not _GENERATOR:
        raise TypeError("not a generator of the run")
    value.close()


def _send(number, value):
    """The test sent ``value`` into the program's iterator ``number``: its ``send``, raising as it raises (one that
    is no generator has none: AttributeError, as in one interpreter)."""
    return _live_objects()[number].send(value)


def _throw(number, name, args):
    """The test threw the builtin exception ``name(*args)`` into the program's iterator ``number``: its ``throw``,
    raising as it raises (the class as the harness found the builtins: the judge sends only theirs)."""
    kind = _ORIGINAL_BUILTINS.get(name)
    if not (_type(kind) is _type and issubclass(kind, BaseException)):
        raise TypeError(f"{name} is no builtin exception")
    return _live_objects()[number].throw(kind(*args))


def _rollback(mark):
    """Forget the numbers given since ``mark`` (a record that will not be sent must not shift later numbers)."""
    for key in list(_SEEN)[mark:]:
        del _SEEN[key]
    del _LIVE[mark:]
    del _SNAPS[mark:]


def _live_prepare(name, args, kwargs, sync, namespace, functions):
    """(function, args, kwargs) of one call, after the test's changes ("sync") were applied to the numbered
    objects; new objects of the call's arguments are numbered in the judge's order (contents of sync first)."""
    live = _live_objects()
    changes = [(live[number], _synced(live[number], contents, live)) for number, contents in sync]
    args, kwargs = _decode_call(args, kwargs, live)
    for target, items in changes:
        _overwrite(target, items)
    for number, _contents in sync:
        _SNAPS[number] = _snapshot(live[number])
    _SNAPS.extend([_snapshot(v) for v in live[len(_SNAPS) :]])
    if name == "":  # a step of an iterator the program returned; [number, 0]: the test dropped it, 1: closed it,
        if len(args) == 3 and args[1] == 2:  # [number, 2, value]: sent it value (a generator's send)
            return _send, [args[0], args[2]], {}
        if len(args) == 4 and args[1] == 3 and _type(args[3]) is list:  # [number, 3, name, args]: threw it one
            return _throw, [args[0], args[2], args[3]], {}
        return (next, [live[args[0]]], {}) if len(args) == 1 else ((_release, _close)[args[1]], [args[0]], {})
    if name not in functions:
        try:
            functions[name] = _resolve(namespace, name)  # noqa: F821 - _harness_runtime.py's, compiled after
        except BaseException:  # noqa: B036
            functions[name] = None
    return functions[name], args, kwargs


def _live_call(name, args, kwargs, sync, namespace, functions):
    """The record body of one call of an assert test's run (the harness adds the case index)."""
    if not _LIVE_RUN:
        _LIVE_RUN.append(True)
    mark = len(_live_objects())
    try:
        fn, args, kwargs = _live_prepare(name, args, kwargs, sync, namespace, functions)
    except BaseException:  # noqa: B036 - not the judge's numbering: a call of another pass, never used
        _rollback(mark)
        return '{"ok": false, "unencodable": true}'
    if fn is None:
        return '{"ok": false, "raised": "NameError", "upd": []}'
    live = _live_objects()  # what the program can reach in this call: what it holds now, and the arguments
    # a weak reference reaches an object as well as a strong one (a set, deque or Counter the program kept by a
    # weakref.ref and changes in a later call): such an object is compared too
    held = [n for n in range(len(live)) if _refcount(live[n]) > _UNHELD or _weakcount(live[n])]
    try:
        value, raised = fn(*args, **kwargs), None
    except BaseException as exc:  # noqa: B036 - SystemExit in a call is that call's failure
        value, raised = None, exc
    record = _live_record(value, raised, held, name == "")
    if _module_changed(namespace) or _interpreter_changed():  # what the judge read or the test shares: stale
        return '{"ok": false, "unencodable": true}'
    return record[:-1] + ', "dc": true}' if _decimal_changed() else record


_LOADED = []  # (builtin names its module left unbound, builtins' values, [(class, its __bases__)]) once loaded
_BASES = type.__dict__["__bases__"].__get__


def _module_state(namespace):
    """What a call of the program must leave as its module's code left it (red team R9b-3): the builtin names its
    module did not bind (a test's read of one is trusted as the builtin), the objects ``builtins`` holds, each
    class's bases (the module's classes and the classes in their bodies). Taken in ``_calls_child`` right after
    the module ran; compared after each assert-test call (``_module_changed``)."""
    unbound = tuple(name for name in _ORIGINAL_BUILTINS if name not in namespace)
    held = tuple(vars(builtins).get(name, _LOADED) for name in _ORIGINAL_BUILTINS)
    classes = [value for value in list(namespace.values()) if isinstance(value, type)]
    classes += [inner for outer in classes for inner in list(vars(outer).values()) if isinstance(inner, type)]
    return unbound, held, [(cls, _BASES(cls)) for cls in classes]


def _module_changed(namespace):
    try:
        unbound, held, classes = _LOADED[0]
        builtins_now = vars(builtins)
        return (
            any(name in namespace for name in unbound)
            or any(builtins_now.get(name, _LOADED) is not value for name, value in zip(_ORIGINAL_BUILTINS, held))
            or any(_BASES(cls) is not bases for cls, bases in classes)
        )
    except BaseException:  # noqa: B036 - a state that cannot be read is a changed one: the call fails
        return True


_WATCHED = []  # (name, module, {its namespace}) of each standard module the test uses
_module_dict = type(sys).__dict__["__dict__"].__get__
_program_recursion_limit = sys.getrecursionlimit  # the harness's own count replaces it (``_harness._main``)
_digits_limit = getattr(sys, "get_int_max_str_digits", lambda: 0)  # Python 3.11+
_DIGITS_DEFAULT = _digits_limit()  # the evaluation worker's (interpreters start alike)
_items, _get, _import = dict.items, dict.get, __import__  # the genuine ones: taken before the program runs


def _watch_modules(names):
    """Before the program runs: the namespace of each standard module the test imports or reads (``assert_plan.
    watched_modules``: dotted names included), loaded now if it is not yet, which the test would read as the
    program left it in one interpreter (red team R10J-6: ``math.isclose = ...``, at load or in a call; R10bJ-3:
    ``collections.abc``, ``sys.modules["urllib.parse"]``). Compared after each call."""
    for name in names:
        try:
            module = sys.modules.get(name) or (_import(name) and sys.modules.get(name))
            _WATCHED.append((name, module, dict(_items(_module_dict(module)))))
        except BaseException:  # noqa: B036 - not importable here (or not a module): the test's own import fails
            pass


def _interpreter_changed():
    """Whether the program left state the test shares in one interpreter and the judge's does not: a recursion
    limit under CPython's default (the test's own nested comparisons would raise), an int-digits limit lowered
    (the test's own conversions would raise: R10bJ-2), or a watched module changed."""
    try:
        limit = _digits_limit()
        if _program_recursion_limit() < 1000 or (limit and (limit < _DIGITS_DEFAULT or not _DIGITS_DEFAULT)):
            return True
        modules = _module_dict(sys)["modules"]
        for name, module, known in _WATCHED:
            now = _module_dict(module)
            if _get(modules, name) is not module or _namespace_changed(name, now, known, modules):
                return True
        return False
    except BaseException:  # noqa: B036 - a state that cannot be read is a changed one: the call fails
        return True


def _namespace_changed(name, now, known, modules):
    """Whether a watched namespace lost, rebound or gained a name; a submodule the program loaded binds its name
    in its package (``import email.utils`` adds ``utils`` to ``email``: R10bJ-4), which one interpreter shows too."""
    for key, value in _items(known):
        if _get(now, key, _WATCHED) is not value:
            return True
    if _len(now) == _len(known):
        return False
    for key, value in _items(now):
        if key not in known and not (_type(key) is str and _get(modules, name + "." + key, _WATCHED) is value):
            return True
    return False


_DECIMAL_DEFAULTS = (28, "ROUND_HALF_EVEN", -999999, 999999, 1, 0)  # decimal's context as a thread starts with it
_DECIMAL_TRAPS = ("Clamped", "DivisionByZero", "FloatOperation", "Inexact", "InvalidOperation", "Overflow")
_DECIMAL_TRAPS += ("Rounded", "Subnormal", "Underflow")


def _decimal_changed():
    """Whether the program's ``decimal`` context (precision, rounding, exponents, capitals, clamp, traps) differs
    from a new thread's: the test's decimal arithmetic would read it in one interpreter (red team R8-6)."""
    module = sys.modules.get("decimal")
    if module is None:
        return False
    try:
        context = module.getcontext()
        values = (context.prec, context.rounding, context.Emin, context.Emax, context.capitals, context.clamp)
        traps = tuple(name for name in _DECIMAL_TRAPS if context.traps[getattr(module, name)])
        return values != _DECIMAL_DEFAULTS or traps != ("DivisionByZero", "InvalidOperation", "Overflow")
    except BaseException:  # noqa: B036 - a broken decimal module: the test may read it broken
        return True


def _live_record(value, raised, held, step=False):
    """The record of a call: what it changed in the numbered objects it could reach (``held``, by number), then its
    value or its exception's arguments. An exception the call returned (the test made an instance of the program's
    class: ``program_exceptions._StandInClass``) is written as a raised one with ``"made": true``."""
    live = _live_objects()
    mark = len(live)
    try:
        if _raised_changed():  # noqa: F821 - in _harness_program.py: an earlier raised exception changed since
            raise TypeError("the program changed an exception it raised to the test")
        if _library_changed():  # noqa: F821 - in _harness_library.py: a library value's class, since it crossed
            raise TypeError("the program changed a library value's class since it crossed")
        made = raised is None and not step and isinstance(value, BaseException)  # returned, not raised
        exc = value if made else raised
        record = '{"ok": true' if exc is None else '{"ok": false, "raised": "' + _exception_name(exc) + '"'
        record += ', "made": true' if made else ""
        changed = [n for n in held if not _unchanged(live[n], _SNAPS[n])]
        updates = ["[" + _int_repr(n) + "," + _content(live[n]) + "]" for n in changed]
        record += ', "upd": [' + _str_join(",", updates) + "]"
        if exc is not None:
            before = len(_SEEN)  # an iterator's bare end numbers nothing: asked for more, it changes no number
            end = step and _type(exc) is StopIteration
            text = "" if end and not BaseException.args.__get__(exc) else _exception_args(exc)
            if end and text and ', "exc": ' not in text:  # the value it ended with is no plain data: unencodable
                raise TypeError("an iterator's end value")
            if not text:
                _rollback(before)
            record += text + "}"
        else:
            record += ', "value": ' + _encode(value) + "}"
        if exc is not None and not made:
            _watch_raised(exc)  # noqa: F821 - in _harness_program.py
        live = _live_objects()
        for n in changed:
            _SNAPS[n] = _snapshot(live[n])
        _SNAPS.extend([_snapshot(v) for v in live[len(_SNAPS) :]])
        return record
    except BaseException:  # noqa: B036
        _rollback(mark)
        return '{"ok": false, "unencodable": true}'
