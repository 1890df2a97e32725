"""Sets in the program's iteration order, the judge's side: where no set of the judge's takes the order the
program's set had (another table history, str hashes of another seed), ``plain_data`` rebuilds it as one of these
(named ``set``/``frozenset``). ``_plain_kind`` is the plain type a value crosses as (such a set crosses as a set).

Stdlib only and no trl_ext import: loaded like ``plain_data.py`` (see there).
"""

from __future__ import annotations

import ast
import random
import types
from collections.abc import Iterator
from typing import Any


def _plain_kind(value: Any) -> type:
    return _PLAIN_KINDS.get(type(value), type(value))  # a program-order set crosses as a set


def _in_order(made: set | frozenset, base_iter: Any) -> list:
    """The elements of ``made`` in the program's order (elements the test added since: after, in the table's)."""
    kept = [item for item in getattr(made, "_order", ()) if item in made]
    known = set(kept)
    return kept + [item for item in base_iter(made) if item not in known]


_ORDERS = 64  # insertion orders tried where colliding elements took their slots otherwise than listed
_SET_BYTES = set.__sizeof__(set())


def reordered(frozen: bool, items: list, slots: int, made: set | None) -> Iterator[set | frozenset]:
    """Real sets holding ``items`` in a table of the program's size (``slots``, where a fresh one has it), inserted
    in other orders: of two colliding elements the first inserted takes the first slot, so the elements listed in
    the program's order can fill a fresh table otherwise (red team round 13: ``{15, 7}``, made from 15 then 7, lists
    as [7, 15]; the same elements added in that listed order, 7 then 15, list as [15, 7]). ``made``: the set to fill (None for a frozenset)."""
    fresh = (frozenset.__sizeof__(frozenset(items)) - _SET_BYTES) // 16
    if not 2 <= len(items) <= 64 or max(fresh, 8) != slots:
        return
    shuffler, order = random.Random(len(items)), list(items)
    for _ in range(_ORDERS):
        shuffler.shuffle(order)
        if made is None:
            yield frozenset(order)
        else:
            made.clear()
            made.update(order)
            yield made


class ProgramOrderSet(set):
    """A program's set whose order no table of the judge's takes (another history, str hashes of another seed):
    iteration, ``pop()`` and ``repr`` in the program's order, the rest a set's (``type()`` shows it, named set)."""

    __slots__ = ("_order", "_next")

    def __iter__(self):
        return iter(_in_order(self, set.__iter__))

    def pop(self) -> Any:  # from where the last pop() left off, as CPython's does: linear popping all
        order, start = getattr(self, "_order", ()), getattr(self, "_next", 0)
        self._next = next((i for i in range(start, len(order)) if order[i] in self), len(order))
        item = order[self._next] if self._next < len(order) else next(set.__iter__(self), self)
        if item is self:
            raise KeyError("pop from an empty set")
        self.remove(item)
        return item

    def __repr__(self) -> str:
        return "{" + ", ".join(map(repr, self)) + "}" if self else "set()"


class ProgramOrderFrozenset(frozenset):
    """The frozenset counterpart of ``ProgramOrderSet`` (named ``frozenset``)."""

    __slots__ = ("_order",)

    def __iter__(self):
        return iter(_in_order(self, frozenset.__iter__))

    def __repr__(self) -> str:
        return "frozenset({" + ", ".join(map(repr, self)) + "})" if self else "frozenset()"


_PLAIN_KINDS = {ProgramOrderSet: set, ProgramOrderFrozenset: frozenset}
for _kind, _base in _PLAIN_KINDS.items():
    _kind.__name__, _kind.__qualname__, _kind.__module__ = _base.__name__, _base.__name__, "builtins"


_IMMUTABLE = (int, float, complex, str, bytes, tuple, frozenset)


IDENTITY_HOOK = "__trl_ext_is__"  # the test's name for ``identical`` (``program_exceptions.stand_ins`` binds it)


def identity_visit(transformer: ast.NodeTransformer, node: ast.Compare) -> ast.expr:
    """A ``visit_Compare`` for the transformer that rewrites the test (``replay.rewrite_asserts``)."""
    return identity_call(transformer.generic_visit(node), IDENTITY_HOOK)


def identity_call(node: Any, hook: str) -> Any:
    """The test's ``a is b`` as ``hook(a, b)`` (``is not``: negated), for ``identical``; a comparison with a
    constant side (``x is None``) or of more than two sides stays as it is."""
    if not isinstance(node, ast.Compare) or len(node.ops) != 1 or not isinstance(node.ops[0], (ast.Is, ast.IsNot)):
        return node
    sides = [node.left, *node.comparators]
    if any(isinstance(side, ast.Constant) for side in sides):
        return node
    call: ast.expr = ast.Call(ast.Name(hook, ast.Load()), sides, [])
    call = ast.UnaryOp(ast.Not(), call) if isinstance(node.ops[0], ast.IsNot) else call
    return ast.copy_location(call, node)


def identical(a: Any, b: Any, refuse: Any) -> bool:
    """``a is b``, refused (``refuse(why)`` raises) where a side is an immutable value (a number, text, a tuple, a
    frozenset): a value that crossed the sandbox is made anew from each record, so its identity is not the
    program's (red team R8-8: ``T = (1, 2); f() is not f()`` passed). A float NaN is the run's numbered object:
    its identity crosses (``plain_encode``)."""
    if any(issubclass(type(side), _IMMUTABLE) and not _numbered(side) for side in (a, b)):
        refuse("the test compares numbers, text or tuples by identity (is), which does not cross the sandbox")
    # type() only: isinstance reads ``__class__``, which a program subclass value refuses (``subclass_value``)
    a, b = (
        vars(s)["_trl_ext_base"] if issubclass(type(s), type) and "_trl_ext_base" in vars(s) else s for s in (a, b)
    )
    rebuilt = any(getattr(type(side), "_trl_ext_rebuilt", 0) for side in (a, b))
    rebuilt = rebuilt and all(issubclass(type(side), BaseException) for side in (a, b))  # else distinct in CPython
    if rebuilt and a is not b:  # a new object per record (red team R9-2): "the same" holds, "another" is unknown
        refuse("the test compares the program's exceptions by identity (is), which does not cross the sandbox")
    return a is b


def _numbered(value: Any) -> bool:
    return type(value) is bool or (type(value) is float and value != value)  # a bool is one; a NaN is numbered


# the builtin types a program's subclass instance crosses as (its storage, read in the sandbox), with its own texts
SUBCLASSED = (int, float, complex, str, bytes, bytearray, tuple, list, dict, set, frozenset)


def subclass_value(classes: dict | None, shape: Any, texts: list, value: Any, limit: int) -> Any:
    """The test's object for an instance of a program's subclass of a builtin type (``class Money(int)``, an
    ``IntEnum`` member): an instance of one judge class per class of the run (``shape``: [number, name, qualname,
    whether it keeps the base's ``__format__``]; at most ``limit`` classes in ``classes``), a subclass of
    ``value``'s type holding ``value``, so ``==``, hash and every method of the base are CPython's, ``type()`` is
    not the base, and ``repr``/``str``/``format(x, '')`` give ``texts``, what the program's own methods gave in the
    sandbox (None where they raised). Whatever else the program's class could answer differently (another
    attribute, ``__class__``, so ``isinstance`` against a class it is not, a format spec of its own
    ``__format__``) makes the test ``unsupported`` (``classes["refuse"]``). ``classes`` None: a shape check, the
    value itself. ValueError for a malformed one."""
    if type(shape) is not list or len(shape) != 4 or type(shape[0]) is not int or not 0 <= shape[0] < 1 << 20:
        raise ValueError("a subclass's class is [number, name, qualname, keeps format]")
    if not all(type(s) is str and 0 < len(s) <= 200 for s in shape[1:3]) or type(shape[3]) is not bool:
        raise ValueError("a subclass's class is [number, name, qualname, keeps format]")
    if len(texts) != 3 or not all(t is None or type(t) is str for t in texts):
        raise ValueError("a subclass value's texts are [repr, str, format]")
    base = _plain_kind(value)
    if base not in SUBCLASSED:
        raise ValueError("a subclass value of no builtin base")
    if classes is None:
        return value
    kind = classes.get(("sub", shape[0]))
    if kind is None and len(classes) >= limit:
        raise ValueError(f"more than {limit} classes")
    if kind is None:
        made_class = _subclass(tuple(shape), base, classes.get("refuse"), classes.get("now", _never))
        kind = classes[("sub", shape[0])] = (shape + [base], *made_class)
    if kind[0] != shape + [base]:
        raise ValueError("a class changed its shape")
    made = kind[1].__new__(kind[1], value)  # an immutable base holds it now; a mutable one is filled below
    if not _frozen(value):  # the test may change it: the texts are of the value as it was (red team R8b-4)
        texts = [None, None, None]
    now = classes.get("now", _never)()  # the program's calls so far: the value is true until its next one
    kind[2][id(made)] = (made, tuple(texts), now)  # alive with the evaluation: its id stays its own
    if base in _FILLED:
        base.__init__(made, value)  # through its guarded __setitem__ (a dict's): registered first
    return made


_FILLED = (list, dict, set, bytearray)  # made empty by __new__


def _never() -> int:
    return -1  # no evaluation counts the calls: every read refuses (``_subclass``'s ``fresh``)


def _frozen(value: Any) -> bool:
    """Whether nothing the test does can change ``value`` (so its texts stay true): numbers, text and tuples or
    frozensets of such; a list, dict, set, bytearray (or anything else, held at any depth) is not."""
    kind = type(value)  # not isinstance: it would read a judge subclass's __class__, which refuses
    if issubclass(kind, (int, float, complex, str, bytes)) or value is None:
        return True
    return issubclass(kind, (tuple, frozenset)) and all(_frozen(item) for item in value)


# what the judge's class answers from its base's C code only while the value is fresh (red team R9-1): every
# method of the base but these, and the reflected operators the base lacks (the program's class may add them)
_UNGUARDED = {"__new__", "__init__", "__init_subclass__", "__subclasshook__", "__class_getitem__", "__class__"}
_UNGUARDED |= {"__getattribute__", "__getattr__", "__repr__", "__str__", "__format__", "__setattr__", "__delattr__"}
_REFLECTED = ("__radd__", "__rmul__", "__rmod__", "__rand__", "__ror__", "__rxor__", "__rsub__")
_CLASS_ONLY = {"__slots__", "__module__", "__dict__", "__weakref__", "__doc__"}  # the judge class's (R9-10)


def _instance_methods(base: type) -> list[str]:
    """The methods of ``base`` an instance answers (its own and ``object``'s; ``type(x).upper(x)`` included), but
    those in ``_UNGUARDED`` and its class and static methods (``dict.fromkeys``)."""
    found = {}
    for klass in reversed(base.__mro__):
        found.update(vars(klass))
    kinds = (types.MethodDescriptorType, types.WrapperDescriptorType)
    return [name for name, raw in found.items() if type(raw) in kinds and name not in _UNGUARDED]


def _subclass(shape: tuple, base: type, refuse: Any, now: Any) -> tuple[type, dict]:
    """(the judge class, its instances' (instance, texts, the program's calls when made) by id). An instance is
    the program's value as it was at its record: a later call of the program may have changed its class, its
    own attributes or what its ``repr`` reads (red team R9-1), so after the program's next call every read of it
    through the class (its methods, operators, ``hash``, ``==``, texts, attributes) refuses the test; what the
    base's C code reads from its storage without the class (``str.upper(x)``) is CPython's answer too, as the
    storage of an immutable value cannot change."""
    _, name, qualname, plain_format = shape

    def refused(what: str) -> Any:
        why = f"the test reads {what} of a value of the program's class {name} (a subclass of {base.__name__})"
        if refuse is not None:
            refuse(why)
        raise TypeError(why)

    def fresh(self: Any, what: str) -> tuple:
        found = texts.get(id(self))
        if found is None or found[0] is not self:
            return refused(what)
        if found[2] != now():
            return refused(f"{what} after a later call of the program, which may have changed it,")
        return found

    def text(self: Any, which: int, what: str) -> str:
        found = fresh(self, what)
        return refused(what) if found[1][which] is None else found[1][which]

    def guarded(method_name: str) -> Any:
        method = getattr(base, method_name, None)

        def guard(self: Any, *args: Any, **kwargs: Any) -> Any:
            fresh(self, method_name)
            return NotImplemented if method is None else method(self, *args, **kwargs)

        guard.__name__ = guard.__qualname__ = method_name
        return guard

    def attribute(self: Any, attribute: str) -> Any:
        fresh(self, f"{attribute!r}")
        if attribute in judge_only:
            return refused(f"{attribute!r}")
        return base.__getattribute__(self, attribute)

    texts: dict = {}
    judge_only = _CLASS_ONLY | {"__getattr__"} | {n for n in _REFLECTED if not hasattr(base, n)}
    namespace = {n: guarded(n) for n in [*_instance_methods(base), *_REFLECTED]}
    namespace.update(
        {
            "__slots__": (),
            "__module__": "__main__",
            "__qualname__": qualname,
            "__repr__": lambda self: text(self, 0, "repr()"),
            "__str__": lambda self: text(self, 1, "str()"),
            "__getattribute__": attribute,
            "__getattr__": lambda self, attribute: refused(f"{attribute!r}"),
            "__class__": property(lambda self: refused("__class__ (isinstance of another class)")),
        }
    )
    namespace["__format__"] = guarded("__format__")
    if not plain_format:
        namespace["__format__"] = lambda self, spec: text(self, 2, "format()") if spec == "" else refused("format()")
    made = type(name, (base,), namespace)
    del made.__slots__  # the layout stays; the program's class has none of its own (``_harness_library``)
    return made, texts
