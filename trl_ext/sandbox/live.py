"""The live objects of an assert test's run, the judge's side (the harness's is ``_harness_live.py``).

In one interpreter the test and the program share their objects for the whole test; here they live on both sides
of the sandbox and are kept equal at every call. Every list, dict, set and mutable library object (deque,
bytearray, Counter, OrderedDict, defaultdict, array) that crossed, either way, has one number for the whole run
and one object here. Before each call the judge sends what the test changed in numbered objects since the
program last saw them (the call's "sync", part of its key: replayed in every round); after it, the record holds
what the call changed ("upd"), applied here in place, all at once. A change is found by comparing a snapshot of
each object's slots by identity (a nested container is numbered and compared itself). An iterator the program
returns stays in the sandbox (``ProgramIterator``): each item is a call of the run, made when the test asks.

Stdlib only, and no trl_ext import but the plain-data codec and ``program_exceptions``: ``replay.py`` imports it, in the judge as a module of
the package and in the evaluation worker (which runs ``replay.py`` by its path) as the file next to it.
"""

from __future__ import annotations

import array
import builtins
import collections
import itertools
import operator
import sys
import types
import weakref
from collections.abc import Callable
from typing import Any

if __package__:  # the judge: a module of the package
    from trl_ext.sandbox import program_exceptions as _exceptions
    from trl_ext.sandbox.plain_data import decode_record, encode
else:  # the evaluation worker: loaded by its path after plain_data.py and program_exceptions.py (see replay.py)
    decode_record, encode = sys.modules["trl_ext_plain_data"].decode_record, sys.modules["trl_ext_plain_data"].encode
    _exceptions = sys.modules["trl_ext_program_exceptions"]


class ProgramIterator:
    """An iterator the program returned, left in the sandbox: each ``next()`` asks the run for one item, so what
    a generator reads lazily, changes or raises happens when the test asks for it, as in one interpreter. Equal
    only to itself (a generator is)."""

    __slots__ = ("_step", "_number", "_release", "__weakref__")

    def __init__(self, step: Callable[[int], Any], number: int, release: Callable[..., None]) -> None:
        self._step, self._number, self._release = step, number, release

    def __del__(self) -> None:  # the test dropped it: so does the sandbox (a generator's finally runs then)
        self._release(self._number, self)

    def __iter__(self) -> ProgramIterator:
        return self

    def __next__(self) -> Any:
        return self._step(self._number)

    def close(self) -> None:
        """As a generator's (``replay._Session.release``: refused unless it has ended)."""
        self._release(self._number, self, True)

    def __repr__(self) -> str:
        return f"<the program's iterator {self._number}>"


_MAX_ITERATOR_CLASSES, _MAX_CHAIN, _MAX_CLASS_NUMBER = 64, 16, 1 << 20  # per evaluation; as program_exceptions.py


def _send(self: ProgramIterator, value: Any) -> Any:
    """A generator's ``send``: a call of the run that sends ``value`` (the test's data, crossed as a call's argument)
    into the program's generator and returns what it yields next (red team round 12, R12J-7: a coroutine-style
    test scored 0). Only the generator class has it, as in CPython."""
    return self._step(self._number, 2, value)


def _throw(self: ProgramIterator, kind: Any, value: Any = None, traceback: Any = None) -> Any:
    """A generator's ``throw``: the exception, made as CPython makes it from ``kind``/``value``, crosses as a
    call's argument (the name of its class and its args) and is raised at the program generator's ``yield``;
    what it yields next comes back, what it raises is raised here (red team round 12, R12J-7). Only an exception
    of a builtin class crosses (what the sandbox rebuilds from its name and args is the same exception); another
    (the test's own class) refuses the test."""
    if traceback is not None:
        _refuse({"refuse": type(self)._trl_ext_refuse}, "the test throws a traceback into the program's generator")
    exception = _thrown(kind, value)
    name = type(exception).__name__
    if getattr(builtins, name, None) is not type(exception) or not _rebuilt_from_args(exception):
        _refuse({"refuse": type(self)._trl_ext_refuse}, f"the test throws a {name} of its own (class or state)")
    return self._step(self._number, 3, name, list(exception.args))


_SLOTS = (types.MemberDescriptorType, types.GetSetDescriptorType)
_LINKS = ("__dict__", "args", "__cause__", "__context__", "__traceback__", "__suppress_context__")


def _rebuilt_from_args(exception: BaseException) -> bool:
    """Whether ``type(exception)(*exception.args)``, what the sandbox throws, is the same exception: no attributes,
    cause, context or traceback of its own, and every slot of its class the same (red team round 14b, R14bJ-1: an
    OSError's ``filename``, an ImportError's ``name=`` are not in ``args``)."""
    if exception.__dict__ or exception.__suppress_context__:
        return False
    if any(link is not None for link in (exception.__cause__, exception.__context__, exception.__traceback__)):
        return False
    try:
        rebuilt = type(exception)(*exception.args)
        slots = {
            name for klass in type(exception).__mro__ for name, member in vars(klass).items() if type(member) in _SLOTS
        }
        return all(
            _same(getattr(exception, name, _SLOTS), getattr(rebuilt, name, _SLOTS)) for name in slots - set(_LINKS)
        )
    except Exception:  # noqa: BLE001 - what cannot be rebuilt or compared is not the same
        return False


def _same(a: Any, b: Any) -> bool:
    return a is b or (type(a) is type(b) and bool(a == b))


def _thrown(kind: Any, value: Any) -> BaseException:
    """The exception ``generator.throw(kind, value)`` raises, as CPython builds it (a TypeError for the rest)."""
    if isinstance(kind, BaseException):
        if value is not None:
            raise TypeError("instance exception may not have a separate value")
        return kind
    if not (isinstance(kind, type) and issubclass(kind, BaseException)):
        raise TypeError(
            f"exceptions must be classes or instances deriving from BaseException, not {type(kind).__name__}"
        )
    if isinstance(value, kind):
        return value
    return kind() if value is None else kind(*value) if type(value) is tuple else kind(value)


def iterator_class(classes: list | None, made: dict, table: dict | None = None) -> type:
    """The class of a program's iterator in the test, a ``ProgramIterator`` subclass named as the program's class
    (``__name__``, ``__qualname__``, ``__module__``), so ``type(a) is type(b)`` and ``type(a).__name__`` are
    CPython's. ``classes``: the record's entries (the class, then the program classes of its MRO): a builtin
    iterator type is one entry [name, qualname, module, None], one class per (module, qualname) in ``made`` (one
    evaluation's); a program class is [name, qualname, module, number, bases, own], one class per class NUMBER of
    the run in ``table`` (the evaluation's table of the program's classes, shared with its exception stand-ins:
    ``program_exceptions._stand_in``'s rule), made with its exact direct bases (another entry's number, "object"),
    so ``isinstance(b, type(a))`` holds where CPython's does (red team R8-7: a class keyed by its chain, rebuilt
    as single inheritance, lost its mixins). A base the judge cannot rebuild (null: a builtin base, a metaclass),
    a number that is another kind of class in the table, or a class that changed refuses the test; so does the
    test's read of an attribute the judge's class lacks (instance attributes, class attributes, methods), and of
    ``hash``/``repr``/``==``/``bool``... of a class that defines more than ``__iter__``/``__next__``/``__init__``
    (``own``). None: a generator (one class, ``generator``). ValueError if malformed."""
    if classes is None:
        classes = [["generator", "generator", "builtins", None]]
    if type(classes) is not list or not 0 < len(classes) <= _MAX_CHAIN or not all(map(_class_entry, classes)):
        raise ValueError("an iterator's classes are [[name, qualname, module, number(, bases, own)], ...]")
    if classes[0][3] is None:
        if len(classes) > 1:
            raise ValueError("a builtin iterator type has no program base")
        if table is not None and table.get("real_types"):  # ``program_exceptions.real_types``
            _refuse(table, f"{table['real_types']}, which the program's {classes[0][0]} object is not of")
        key = (classes[0][2], classes[0][1])
        if key not in made:
            if len(made) >= _MAX_ITERATOR_CLASSES:
                raise ValueError(f"more than {_MAX_ITERATOR_CLASSES} iterator classes")
            name, qualname, module, _ = classes[0]
            members = {"__slots__": (), "__qualname__": qualname, "__module__": module, "__doc__": None}
            if key == ("builtins", "generator"):
                members.update(send=_send, throw=_throw)
            real = _BUILTIN_ITERATORS.get(key)  # its attributes: the real type's (red team round 14, R14J-8)
            members.update(_trl_ext_refuse=(table or {}).get("refuse"), _trl_ext_real=real)
            members.update(__getattr__=_builtin_attribute, __repr__=_refused_operation)
            made[key] = type(name, (ProgramIterator,), members)
        return made[key]
    if any(entry[3] is None for entry in classes):
        raise ValueError("a program iterator class has a number")
    order = {entry[3]: k for k, entry in enumerate(classes)}
    if len(order) != len(classes) or not all(_later(entry, k, order) for k, entry in enumerate(classes)):
        raise ValueError("an iterator class's bases are later entries of its MRO")
    return _numbered_class(classes, 0, order, made if table is None else table)


def _later(entry: list, k: int, order: dict) -> bool:
    return all(base is None or base == "object" or order.get(base, -1) > k for base in entry[4])


def _numbered_class(classes: list, k: int, order: dict, table: dict) -> type:
    name, qualname, module, number, bases, own = classes[k]
    signature = ("iterator", name, qualname, module, tuple(bases), own)
    known = table.get(number)
    if known is not None:
        if known[1] != signature:
            _refuse(table, f"the program's class {name} is another class in another record (or changed)")
        return known[0]
    if sum(type(key) is int for key in table) >= _MAX_CLASSES:
        _refuse(table, f"the program's classes are more than {_MAX_CLASSES}")
    if None in bases:
        _refuse(table, f"the program's iterator class {name} derives from a class the judge cannot rebuild")
    named = ["b:object" if b == "object" else "c:" + classes[order[b]][1] for b in bases]
    why = "" if module == "__main__" else "a class of a library, which the judge does not read"
    plain = _exceptions.PLAIN_MEMBERS | {"__iter__", "__next__", "__init__"}
    why = why or _exceptions.source_mismatch(table.get("source"), name, qualname, own, named, plain)
    if why:  # the chain is the program's process's to write: only the program's source is trusted (R8b-1)
        _refuse(table, f"the program's iterator class {name}: {why}")
    parents = [_numbered_class(classes, order[b], order, table) for b in bases if b != "object"]
    parents.append(ProgramIterator) if "object" in bases or not parents else None
    members = {"__slots__": (), "__qualname__": qualname, "__module__": module, "__doc__": None}
    members.update(_trl_ext_refuse=table.get("refuse"), __getattr__=_refused_attribute)
    if own:
        members.update(dict.fromkeys(_OWN_DUNDERS, _refused_operation))
        members["__class__"] = property(_refused_operation)  # its own may answer isinstance (red team R9-12)
    try:
        made = type(name, tuple(parents), members)
    except TypeError:
        _refuse(table, f"the program's iterator class {name} has bases the judge cannot combine")
    table[number] = (made, signature)
    return made


_MAX_CLASSES = 256  # program classes per evaluation, as program_exceptions.py
_OWN_DUNDERS = ("__hash__", "__repr__", "__str__", "__format__", "__bool__", "__len__", "__eq__", "__ne__")
_OWN_DUNDERS += ("__lt__", "__le__", "__gt__", "__ge__", "__contains__", "__getitem__", "__call__")


def _refuse(table: dict, why: str) -> None:
    refuse = table.get("refuse")
    if refuse is not None:
        refuse(why)  # raises
    raise LookupError(why)


def _builtin_attribute(self: ProgramIterator, name: str) -> Any:
    """A read of what the test's handle on a builtin iterator lacks: an attribute of the real type (a generator's
    ``gi_frame``, ``__name__``; any where the type is not known here) refuses the test; another raises
    AttributeError, as CPython does (a map object's ``send``). Its ``repr`` refuses too (the real one names the
    program's function and an address)."""
    real = type(self)._trl_ext_real
    if real is None or any(name in vars(klass) for klass in real.__mro__):
        _refused_attribute(self, name)
    raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")


def _builtin_iterator_types() -> dict:
    """The builtin iterator types of this interpreter, by (module, qualname) as a record names them."""
    samples = [iter(kind()) for kind in (list, tuple, str, bytes, bytearray, set, frozenset, dict)]
    samples += [iter({}.values()), iter({}.items()), reversed([]), reversed({}), iter(range(0)), iter(range(1 << 70))]
    samples += [map(abs, ()), filter(None, ()), zip(), enumerate(()), iter(int, 0), (x for x in ())]
    samples += [iter(collections.deque()), reversed(collections.deque()), iter(collections.OrderedDict())]
    samples += [iter("\u00e9"), reversed("ab"), itertools.count(), itertools.cycle(()), itertools.repeat(0)]
    samples += [itertools.chain(), itertools.islice((), 0), itertools.accumulate(()), itertools.product()]
    samples += [itertools.permutations(()), itertools.combinations((), 0), itertools.starmap(abs, ())]
    samples += [itertools.zip_longest(), itertools.groupby(()), itertools.pairwise(()), itertools.compress((), ())]
    return {(kind.__module__, kind.__qualname__): kind for kind in map(type, samples)}


_BUILTIN_ITERATORS = _builtin_iterator_types()


def _refused_attribute(self: ProgramIterator, name: str) -> Any:
    """A read of what the judge's iterator lacks: the program's object may hold it (``self.i``, a class
    attribute, a method), so the test is refused rather than told it is absent."""
    refuse = type(self)._trl_ext_refuse
    if refuse is not None and not name.startswith("_trl_ext"):
        refuse(f"the test reads {name!r} of the program's iterator, which only the program's object holds")
    raise AttributeError(name)


def _refused_operation(self: ProgramIterator, *args: Any, **kwargs: Any) -> Any:
    """``hash``, ``repr``, ``==``, ``bool``... of an iterator whose class defines its own members: the program's
    code would answer; the test is refused."""
    _refuse({"refuse": type(self)._trl_ext_refuse}, "the test uses the program's iterator beyond its items")


def _class_entry(entry: Any) -> bool:
    """[name, qualname, module, None] (a builtin iterator type) or [name, qualname, module, number, bases, own]:
    strs of at most 200 characters (the module may be None), a class number in [0, 2**20), 1 to 16 bases each an
    int, "object" or None, and a bool."""
    if type(entry) is not list or len(entry) not in (4, 6):
        return False
    name, qualname, module, number = entry[:4]
    texts = [name, qualname] + ([] if module is None else [module])
    if not all(type(t) is str and 0 < len(t) <= 200 and "\0" not in t for t in texts):
        return False
    if len(entry) == 4:
        return number is None
    bases, own = entry[4], entry[5]
    if type(number) is not int or not 0 <= number < _MAX_CLASS_NUMBER or type(own) is not bool:
        return False
    if type(bases) is not list or not 0 < len(bases) <= 16:
        return False
    return all(b is None or b == "object" or (type(b) is int and 0 <= b < _MAX_CLASS_NUMBER) for b in bases)


def snapshot(value: Any) -> Any:
    """What ``value`` holds, by identity of its items (None: no contents to follow, an iterator)."""
    kind = type(value)
    if kind is list or kind.__name__ == "deque":
        return tuple(value)
    if kind is bytearray:
        return bytes(value)
    if kind is set:
        return frozenset(map(id, value)), tuple(value)  # the items keep their ids
    if isinstance(value, dict):
        return tuple(value), tuple(dict.values(value)), getattr(value, "default_factory", None)
    if kind is array.array:
        return value.typecode + value.tobytes().hex()
    return None


def unchanged(value: Any, snap: Any) -> bool:
    """Whether ``value`` still holds what ``snap`` (its ``snapshot``) saw."""
    kind = type(value)
    if snap is None or kind is bytearray:
        return snap is None or snap == value
    if type(snap) is str:
        return snap == value.typecode + value.tobytes().hex()
    if kind is set:
        return len(value) == len(snap[1]) and frozenset(map(id, value)) == snap[0]
    if isinstance(value, dict):
        return (
            len(value) == len(snap[0])
            and all(map(operator.is_, value, snap[0]))
            and all(map(operator.is_, dict.values(value), snap[1]))
            and getattr(value, "default_factory", None) is snap[2]
        )
    return len(value) == len(snap) and all(map(operator.is_, value, snap))


def _unheld() -> int:
    """``sys.getrefcount`` of an item of a list that only the list holds (as ``apply`` reads it)."""
    probe = [[]]
    return sys.getrefcount(probe[0])


_UNHELD = _unheld()


class LiveObjects:
    """The run's numbered objects (``graph``: {id: number}, [objects by number], as ``encode_call`` takes it),
    the snapshot of each as the program last saw it, how many items the test took from each iterator, the
    iterators that ended, and those the test dropped while the judge was busy (released after the call)."""

    def __init__(self) -> None:
        self.graph: tuple[dict[int, int], list] = ({}, [])
        self.snaps: list = []
        self.steps: dict[int, int] = {}
        self.ended: set[int] = set()
        self.generators: set[int] = set()
        self.dropped: list[int] = []
        self.held: list[int] = []  # the numbered objects the test could reach when the last record came
        self.classes: dict = {}  # the program's iterator classes in the test (``iterator_class``)

    def iterator(
        self, number: int, classes: list | None, step: Callable, release: Callable, table: dict | None = None
    ) -> ProgramIterator:
        """The test's object for the program's iterator ``number`` (a generator when ``classes`` is None);
        ``table``: the evaluation's program classes (``iterator_class``)."""
        made = iterator_class(classes, self.classes, table)(step, number, release)
        if classes is None:  # asking an ended generator for more runs nothing (``replay._Session._no_op``)
            self.generators.add(number)
        return made

    def forget(self, number: int, value: Any) -> None:
        """The test dropped the iterator ``value`` (number ``number``): its id may now be another object's."""
        if self.graph[0].get(id(value)) == number:
            del self.graph[0][id(value)]

    def test_changes(self) -> list[list]:
        """[number, contents] of every numbered object the test changed since the program last saw it (the
        contents name other numbered objects by number; an object met first here is numbered, as in a call)."""
        objects = self.graph[1]
        changed = [n for n in self.held if not unchanged(objects[n], self.snaps[n])]
        return [[n, self._contents(objects[n])] for n in changed]

    def _contents(self, value: Any) -> Any:
        if type(value) is collections.defaultdict:  # the contents only: the factory stays the program's
            return {"dd": [None, encode(dict(value), 1, self.graph, bare=True)["d"]]}
        if type(value) is array.array:  # an array the program returned
            return {"ar": [value.typecode, [encode(v) for v in value.tolist()]]}
        return encode(value, 1, self.graph, bare=True)

    def apply(self, record: dict, sync: list, memo: dict) -> Any:
        """Decode ``record`` (its value, or its exception's arguments) and apply its updates in place; number
        the objects it brought; the synced, updated and new objects are then as the program sees them."""
        numbers, objects = self.graph
        start = len(objects)
        try:
            decoded = decode_record(record, {**memo, "refs": objects})
        except ValueError:
            del objects[start:]  # nothing of a malformed record stays
            raise
        for number in range(start, len(objects)):
            value = objects[number]
            numbers[id(value() if type(value) is weakref.ref else value)] = number
        seen = len(self.snaps)  # objects numbered since (the call's arguments, the record's) are snapshot new
        self.snaps += [snapshot(value) for value in objects[seen:]]
        for number in [entry[0] for entry in sync] + [entry[0] for entry in record.get("upd", ())]:
            if number < seen:
                self.snaps[number] = snapshot(objects[number])
        # an object only ``objects`` holds now is out of the test's reach until a record brings it back: the test
        # cannot change it before the next call (one it changed and dropped since is held here still)
        self.held = [n for n in range(len(objects)) if sys.getrefcount(objects[n]) > _UNHELD]
        return decoded
