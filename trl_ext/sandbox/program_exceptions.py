"""The program's exceptions in the judge (evaluation worker side): the exception a program call raised, rebuilt
from its record (its builtin class, or the stand-in class of the program's own class, with its arguments and the
attributes CPython exposes), and the stand-in classes that the test's ``except MyErr`` catches.

Stdlib only, and no trl_ext import but the plain-data codec: ``replay.py`` imports it, in the judge as a module of
the package and in the evaluation worker (which runs ``replay.py`` by its path) as the file next to it.
"""

from __future__ import annotations

import ast
import builtins
import functools
import sys
from typing import Any

if __package__:  # the judge: a module of the package
    from trl_ext.sandbox import program_sets as _sets
    from trl_ext.sandbox.plain_data import decode
else:  # the evaluation worker: loaded by its path after plain_data.py and program_sets.py (see replay.py)
    decode, _sets = sys.modules["trl_ext_plain_data"].decode, sys.modules["trl_ext_program_sets"]

# KeyboardInterrupt and SystemExit too: a test's ``except Exception`` must not catch them
_EXCEPTIONS = {k: v for k, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)}
_BASES = {**_EXCEPTIONS, "object": object}  # the builtin bases a program class may name


def _program_exception(
    raised: str, name: str, args: Any = None, details: tuple | None = None, classes: dict | None = None
) -> BaseException:
    """The exception the program's call raised (its builtin class, or the stand-in of its program class), with its
    arguments where they crossed and the attributes CPython exposes (``AttributeError.name``, ``__cause__``...).
    Where it cannot be made as the program made it (a group whose exceptions did not cross, a builtin that needs
    more arguments), the test is refused (``_refuse``): never a class with fewer relations."""
    chain, attributes = details or (None, {})
    classes = {} if classes is None else classes
    values = args if type(args) is list else [f"raised by the program's {name}()"]
    kind = _exception_class(chain, None, classes) if chain else _shadow(_EXCEPTIONS.get(raised), classes)
    try:
        exc = type.__call__(kind, *values)  # past a stand-in's refusal to be made by the test
    except (TypeError, ValueError, OverflowError):
        _refuse(classes, f"the program's {name}() raised a {raised} the test cannot be given as it was")
    for attribute, value in attributes.items():
        if attribute in ("__cause__", "__context__") and type(value) is tuple:  # (builtin name, args, chain, attrs)
            chain = [list(c) for c in value[2]] if value[2] else None
            value = _program_exception(value[0], name, value[1], (chain, value[3]), classes)
        if attribute == "__context__" and value == "__cause__":
            value = exc.__cause__  # one object, as after ``raise ... from`` inside its ``except``
        if attribute == "__dict__":  # what the program stored on it (``self.code = 7``; on a builtin one too)
            exc.__dict__.update({k: v for k, v in value if _identifier(k) and k[:1] != "_"})
        elif isinstance(exc, _ATTRIBUTES[attribute]):
            setattr(exc, _STR if attribute == "__str__" else attribute, value)
    exc.__suppress_context__ = attributes.get("__suppress_context__") is True  # setting __cause__ set it
    if not __package__:  # the evaluation worker's fork (one evaluation): its audit hook refuses the test's id()
        REBUILT[id(exc)] = exc  # kept alive, so no other object takes its id
    return exc


def _refuse(classes: dict, why: str) -> None:
    """Refuse the test (the evaluation's "refuse": unsupported_test, 0 for every program): the judge cannot give
    it the program's exception as CPython would, and any class with fewer relations could pass a wrong program."""
    refuse = classes.get("refuse")
    if refuse is not None:
        refuse(why)  # raises
    raise LookupError(why)


_ATTRIBUTES = {"name": (AttributeError, NameError, ImportError), "obj": AttributeError, "path": ImportError}
_ATTRIBUTES.update(filename=OSError, filename2=OSError, __str__=BaseException, __suppress_context__=BaseException)
_ATTRIBUTES.update(__cause__=BaseException, __context__=BaseException, __dict__=BaseException)
REBUILT: dict[int, BaseException] = {}  # every exception rebuilt in this process (one evaluation a worker fork)
_STR, _MAX_CLASSES = "_trl_ext_program_str", 256  # the program's own str() of an exception; classes per evaluation
_MAX_CLASS_NUMBER = 1 << 20  # the classes a run numbers (a record naming a bigger number is malformed)


class _StandInClass(type):
    """The metaclass of the stand-ins of the program's exception classes. The test's call of one the test names
    (``MyErr('x')``, ``raise MyErr``) is a call of the program (``stand_ins``: the sandbox makes the instance); a
    class of its own deriving from one that defines more than a docstring (an ``__init__``, a ``__str__``...)
    cannot be made by the test (its code is the program's)."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        make = cls.__dict__.get("_trl_ext_make")
        if make is not None:
            return make(cls, args, kwargs)
        if cls._trl_ext_own:
            cls._trl_ext_refuse(f"the test makes an instance of the program's class {cls.__name__}")
        return super().__call__(*args, **kwargs)


def _exception_class(chain: list, builtin: Any, classes: dict, doc: str | None = None) -> type:
    """The stand-in of the program's class ``chain[0]``: ``chain`` holds [name, own, number, bases] of it and of
    every class of its MRO but ``object`` and builtin exceptions, ``bases`` its direct bases in order (another
    entry's number, a builtin's name, None for one the judge cannot rebuild). One stand-in per class number of the
    run (never per name), made with those exact bases, so its MRO is CPython's (``except MyErr``, mixins, diamonds);
    where that cannot be (an unknown base, a class whose name or bases changed during the run, past
    ``_MAX_CLASSES``) the test is refused (``_refuse``). ``builtin``: unused (the bases say it)."""
    entries = {entry[2]: entry for entry in chain}
    return _stand_in(chain[0], entries, classes, doc)


def _stand_in(entry: list, entries: dict, classes: dict, doc: str | None = None) -> type:
    name, own, number, bases = entry[0], entry[1], entry[2], tuple(entry[3])
    qualname = entry[4] if len(entry) > 4 else name  # ``Errors.B`` for a class in a class: CPython's __qualname__
    known = classes.get(number)
    if known is not None:
        if known[1] != (name, own, bases, qualname):
            _refuse(classes, f"the program changed its class {name} (its name, qualname or bases) during the run")
        return known[0]
    if sum(type(key) is int for key in classes) >= _MAX_CLASSES:
        _refuse(classes, f"the program's exceptions have more than {_MAX_CLASSES} classes")
    why = source_mismatch(classes.get("source"), name, qualname, own, [_base_qualname(b, entries) for b in bases])
    if why:
        _refuse(classes, f"the program's class {name}: {why}")
    parents = []
    for base in bases:  # a later entry (``_is_chain``): the recursion ends
        parent = _stand_in(entries[base], entries, classes) if type(base) is int else _BASES.get(base)
        if parent is None:
            _refuse(classes, f"the program's class {name} derives from a class the judge cannot rebuild")
        parents.append(parent)
    made: list = []

    def __str__(self: BaseException) -> str:
        text = self.__dict__.get(_STR)
        return text if type(text) is str else super(made[0], self).__str__()

    members = {"__module__": "__main__", "__qualname__": qualname, "__doc__": doc, "__str__": __str__}
    members.update(_identity_members(classes))
    inherited = any(getattr(parent, "_trl_ext_own", False) for parent in parents)  # a base's __init__ runs too
    members.update(_trl_ext_own=own or inherited, _trl_ext_refuse=classes.get("refuse"))
    try:  # CPython made this layout, so type() makes it too; a forged record may name one it refuses
        made.append(_StandInClass(name, tuple(parents), members))
    except TypeError:
        _refuse(classes, f"the program's class {name} has bases the judge cannot combine")
    classes[number] = (made[0], (name, own, bases, qualname))
    return made[0]


def _identity_members(classes: dict) -> dict:
    """``==``/``!=``/``hash`` of a rebuilt exception (red team R9-2): it is a new object per record, so its identity
    is not the program's (one object raised twice is two here): comparing it with another exception or hashing it
    (a set, a dict key, ``list.count``, ``in``) refuses the test; ``e == e`` holds, and against a non-exception the
    other side answers as in CPython. ``a is b`` is the identity hook's (``program_sets.identical``)."""

    def __eq__(self: BaseException, other: Any) -> Any:
        if other is self or not issubclass(type(other), BaseException):  # type(): no __class__ read
            return other is self or NotImplemented
        _refuse(classes, "the test compares the program's exceptions (==, in, count), which compare by identity")

    def __ne__(self: BaseException, other: Any) -> Any:
        equal = __eq__(self, other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self: BaseException) -> int:
        _refuse(classes, "the test hashes the program's exception (a set, a dict key): its identity does not cross")
        return 0

    return {"__eq__": __eq__, "__ne__": __ne__, "__hash__": __hash__, "_trl_ext_rebuilt": True}


class _ShadowClass(type):
    """The metaclass of the judge's subclass of a builtin exception class that a rebuilt exception is made of (for
    ``_identity_members``): the class equals and hashes as the builtin it stands for, and its ``__mro__``/
    ``__bases__`` are the builtin's; ``type(e) is ValueError`` holds through the identity hook."""

    def __eq__(cls, other: Any) -> bool:
        return other is cls or other is vars(cls).get("_trl_ext_base", cls)

    def __ne__(cls, other: Any) -> bool:
        return not _ShadowClass.__eq__(cls, other)

    def __hash__(cls) -> int:
        return hash(vars(cls).get("_trl_ext_base", cls))

    __mro__ = property(lambda cls: vars(cls).get("_trl_ext_base", type).__mro__)
    __bases__ = property(lambda cls: vars(cls).get("_trl_ext_base", type).__bases__)


def _shadow(kind: Any, classes: dict) -> Any:
    """The evaluation's subclass of the builtin exception class ``kind`` (None: None), named as it."""
    if kind is None:
        return None
    made = classes.get(("shadow", kind))
    if made is None:
        members = {"__module__": kind.__module__, "__qualname__": kind.__qualname__, "_trl_ext_base": kind}
        members["__slots__"] = ()  # no __weakref__ of its own (CPython's builtin exceptions have none)
        members["__reduce__"] = lambda self: (kind, self.args, self.__dict__ or None)  # pickle, copy: the builtin
        made = classes[("shadow", kind)] = _ShadowClass(
            kind.__name__, (kind,), {**_identity_members(classes), **members}
        )
        type.__delattr__(made, "__slots__")  # as the builtin, which has no __slots__ to read
    return made


def unshadow(value: Any) -> Any:
    """The builtin exception class a shadow class stands for (anything else as it is)."""
    return vars(value).get("_trl_ext_base", value) if type(value) is _ShadowClass else value


def _base_qualname(base: Any, entries: dict) -> Any:
    """A chain entry's base as the source names it: "b:NAME" for a builtin, "c:QUALNAME" for another entry."""
    if type(base) is int:
        entry = entries[base]
        return "c:" + (entry[4] if len(entry) > 4 else entry[0])
    return None if base is None else "b:" + base


# what a class may bind and still not be "own" (``_harness_program._PLAIN_MEMBERS``; an iterator class's adds
# ``__iter__``, ``__next__``, ``__init__``: ``_harness_live._ITERATOR_MEMBERS``)
PLAIN_MEMBERS = frozenset({"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__annotations__"})


def source_mismatch(
    source: Any, name: str, qualname: str, own: bool, bases: list, plain: frozenset = PLAIN_MEMBERS
) -> str:
    """Why a class the program's process describes (its name and qualname, whether it binds more than ``plain``, its
    direct bases as ``_base_qualname`` gives them) is not the one class statement of the program's SOURCE
    (``program_source.program_facts``, read on the trainer's side) that it must be; '' when it is. The
    description is written in the program's process, which can rewrite it (red team R8b-1): it may only add a
    refusal (``own`` where the source shows none), never a relation the source does not show."""
    if type(source) is not dict or type(source.get("classes")) is not dict:
        return "the judge has no reading of the program's source"
    if source.get("dynamic"):
        return f"the program {source['dynamic']}, so its classes cannot be read from its source"
    fact = source["classes"].get(qualname)
    if fact is None:
        return f"no one class statement {qualname} in the program's source (made by code, or defined twice)"
    if qualname.rpartition(".")[2] != name:
        return f"its name is not the last part of its qualname {qualname}"
    if not own and not set(fact[1]) <= plain:
        return "its source binds more in its body than the description says"
    if None in fact[0] or list(bases) != list(fact[0]):
        return "its bases are not the ones its class statement names (or those cannot be read from the source)"
    return ""


_MAX_NESTED = 8  # chained exceptions inside an exception's attributes (the harness stops at 4)


def exception_details(record: dict, memo: dict) -> tuple[list | None, dict]:
    """(the program classes of a raised exception, its builtin attributes) from a raised record's "cls" and
    "attrs", decoded on their own (an attribute naming one of the run's objects crosses as a copy). ValueError if
    malformed."""
    chain, attributes = record.get("cls"), record.get("attrs")
    if chain is not None and not _is_chain(chain):
        raise ValueError("an exception's classes are [[name, own, number], ...]")
    own = {"nans": memo.get("nans", {}), "classes": memo.get("classes")}  # numbered on their own (the harness's too)
    own.update({key: memo[key] for key in ("loose", "any_order") if key in memo})  # the trainer's reading
    pairs = attributes.get("d") if type(attributes) is dict else None
    attributes = {} if attributes is None else decode(attributes, 0, own)
    if type(pairs) is list and type(attributes) is dict and len(pairs) != len(attributes):
        raise ValueError("an exception's attributes name one attribute twice")  # what the judge reads is one pair
    if not _attributes_ok(attributes):
        raise ValueError("an exception's attributes are builtin ones")
    return chain, attributes


def _attributes_ok(attributes: Any, depth: int = 0) -> bool:
    """Builtin attributes of plain data; ``__str__`` a str; a chained exception a tuple (builtin name, args or None,
    chain or None, attributes), at most ``_MAX_NESTED`` deep (the harness writes 4; decoded aliases can make a
    cycle, which is malformed, never a recursion: red team R10J-4); ``__context__`` "__cause__" when it is that
    one; ``__suppress_context__`` a bool."""
    if type(attributes) is not dict or not all(type(k) is str and k in _ATTRIBUTES for k in attributes):
        return False
    if depth > _MAX_NESTED:
        return False
    for key in ("__cause__", "__context__"):
        value = attributes.get(key)
        if type(value) is tuple and len(value) == 4 and _identifier(value[0]) and type(value[1]) is list:
            chain = value[2] if value[2] is None or _tuples(value[2]) else ()
            if not _attributes_ok(value[3], depth + 1) or not (chain is None or _is_chain([list(c) for c in chain])):
                return False
        elif value is not None and (key, value) != ("__context__", "__cause__"):
            return False
    stored = attributes.get("__dict__", ())
    if not _tuples(stored) or not all(len(pair) == 2 and type(pair[0]) is str for pair in stored):
        return False
    suppress = attributes.get("__suppress_context__", False)
    return type(attributes.get("__str__", "")) is str and type(suppress) is bool


def _tuples(value: Any) -> bool:
    return type(value) is tuple and all(type(c) is tuple for c in value)


def _is_chain(chain: Any) -> bool:
    """[[name, own, number, bases, qualname], ...]: 1 to 16 classes, each a name, a bool, its number in the run (a
    small int, one per entry), its 1 to 16 direct bases (a tuple inside a value), each the number of a LATER entry
    (the MRO's order: no cycle), a builtin base's name or None (one the judge cannot rebuild), and its
    ``__qualname__`` (a str of at most 1000 characters; absent: the name, for a record written by hand)."""
    if type(chain) is not list or not 0 < len(chain) <= 16:
        return False
    later: set = set()
    for entry in reversed(chain):
        if type(entry) is not list or len(entry) not in (4, 5) or type(entry[1]) is not bool:
            return False
        if not _identifier(entry[0]) or (len(entry) == 5 and (type(entry[4]) is not str or len(entry[4]) > 1000)):
            return False
        number, bases = entry[2], entry[3]
        if type(number) is not int or not 0 <= number < _MAX_CLASS_NUMBER or number in later:
            return False
        if type(bases) not in (list, tuple) or not 0 < len(bases) <= 16:
            return False
        if not all(_is_base(base, later) for base in bases):
            return False
        later.add(number)
    return True


def _is_base(base: Any, later: set) -> bool:
    return base is None or (type(base) is int and base in later) or (type(base) is str and base in _BASES)


def _identifier(name: Any) -> bool:
    return type(name) is str and len(name) <= 100 and name.isidentifier()


# what the sandbox's interpreter has: it starts without ``site``, which adds exit, quit, help and the notices
_SITE_NAMES = frozenset({"exit", "quit", "help", "copyright", "credits", "license"})
_BUILTIN_NAMES = frozenset(name for name in vars(builtins) if name[:1] != "_") - _SITE_NAMES


def shadowed_reads(test: str, prefix: str | None, program: list, source: Any = None) -> list[str]:
    """The builtin names the test (or its prefix) reads without binding them that the program's module may hold
    another object for: in CPython the test reads the program's object where the module rebinds it. Decided from
    the program's SOURCE (``source``: ``program_source.program_facts``, its "rebound" names; every name where it
    is missing, "dynamic" or holds "*"); the description the program's process wrote (``program``) can only add
    names: one it lists as ["shadow"], or does not list as ["builtin"] (kept)."""
    reads = _BUILTIN_NAMES & _free_reads(test, prefix or "")
    if not reads:
        return []
    rebound = source.get("rebound") if type(source) is dict and not source.get("dynamic") else None
    if type(rebound) is not list or "*" in rebound:
        return sorted(reads)
    kinds: dict = {}
    for name, what in program:
        if name in reads and what in (["shadow"], ["builtin"]):
            kinds.setdefault(name, set()).add(what[0])
    return sorted(name for name in reads if kinds.get(name) != {"builtin"} or name in rebound)


@functools.lru_cache(maxsize=256)
def _free_reads(test: str, prefix: str) -> frozenset:
    read, bound = set(), set()
    for node in ast.walk(ast.Module(body=ast.parse(prefix).body + ast.parse(test).body, type_ignores=[])):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
    return frozenset(read - bound)


_ITERATOR_TYPES = frozenset({"map", "filter", "zip", "enumerate", "reversed", "iter"})


@functools.lru_cache(maxsize=256)
def real_types(test: str, prefix: str, names: tuple) -> str:
    """How the test can hold a real builtin iterator type ('' when it cannot): ``map`` (``filter``...) or an
    ``itertools`` class read as a value, or ``type(x)``/``x.__class__`` of a value the test made itself. The judge's
    object for a program's builtin iterator is of its own class named as the real one, so ``type(f()) is map``
    would be False where CPython's is True (red team R8-7): the evaluation refuses such a test once one crosses
    (``live.iterator_class``). A name bound from a call of the program (``it = f()``) is the program's value."""
    tree = ast.Module(body=ast.parse(prefix).body + ast.parse(test).body, type_ignores=[])
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    program = set(names)
    for node in [*ast.walk(tree), *ast.walk(tree)]:  # names bound from a program name's value (``x = f()``, ``for``)
        source = node.iter if isinstance(node, (ast.For, ast.comprehension)) else getattr(node, "value", None)
        targets = [node.target] if isinstance(node, (ast.For, ast.comprehension)) else getattr(node, "targets", [])
        if isinstance(node, (ast.Assign, ast.For, ast.comprehension)) and _reads(source) & program:
            program.update(t.id for target in targets for t in ast.walk(target) if isinstance(t, ast.Name))
    for node in ast.walk(tree):
        if id(node) in called:
            continue
        if isinstance(node, ast.Name) and node.id in _ITERATOR_TYPES and isinstance(node.ctx, ast.Load):
            return f"the test reads the builtin type {node.id}"
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "itertools":
            return f"the test reads itertools.{node.attr}"
        if isinstance(node, ast.Attribute) and node.attr == "__class__" and not _reads(node.value) & program:
            return "the test reads the class of a value of its own"
        is_type = isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "type"
        if is_type and not any(_reads(arg) & program for arg in node.args):
            return "the test reads the type of a value of its own"
    return ""


def _reads(node: ast.AST) -> set:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def stand_ins(session: Any, task: dict) -> dict[str, Any]:
    """The test's names for the program's: a function with the program's ``__name__`` and ``__doc__`` that asks
    for a call, or the stand-in class of a program exception class (``_exception_class``). ``session``: the evaluation's
    ``replay._Session``. The description is the program's to write (``records._described_names``), so each kind it
    gives is harmless where false: a stand-in class the test calls asks the program to make the instance
    (``_make``); a function used as a class fails the test as in CPython; a builtin the test reads is refused
    where the program's source may rebind it (``shadowed_reads``); a class chain that is not the source's refuses
    the test (``source_mismatch``). ``task["source"]``: ``program_source.program_facts`` of the program."""
    described = {name: what for name, what in task.get("program") or ()}
    session.exception_classes["source"] = source = task.get("source")  # checks every class chain (``_stand_in``)
    session.exception_classes["real_types"] = real_types(task["test"], task.get("prefix") or "", tuple(task["names"]))
    shadowed = shadowed_reads(task["test"], task.get("prefix"), task["program"], source) if "program" in task else []
    if shadowed:  # the program rebinds builtins the test reads: in CPython the test reads the program's objects
        why = source.get("dynamic") if type(source) is dict else "cannot be read"
        why = f"its source {why}" if why else "its module binds them, or did not say"
        session.refuse(f"the program may rebind {', '.join(shadowed)[:200]}, which the test reads ({why})")
    stand_ins = {_sets.IDENTITY_HOOK: functools.partial(_sets.identical, refuse=session.refuse)}  # ``a is b``
    for name in task["names"]:
        what = described.get(name)
        if what and what[0] == "exc":
            if type(source) is not dict or name in (source.get("functions") or ()):  # a def of the source
                session.refuse(f"the program describes {name} as an exception class, which its source does not show")
            stand_ins[name] = _exception_class(what[1], None, session.exception_classes, what[3])
            if "_trl_ext_make" not in stand_ins[name].__dict__:  # one maker per class: the first name calls it
                type.__setattr__(stand_ins[name], "_trl_ext_make", functools.partial(_make, session, name))
            continue
        stand_ins[name] = session.stand_in(name)
        if what:
            stand_ins[name].__name__, stand_ins[name].__doc__ = what[1], what[2]
    return stand_ins


def _make(session: Any, name: str, cls: type, args: tuple, kwargs: dict) -> Any:
    """The test's ``name(*args, **kwargs)`` where ``name`` was described as the program's exception class ``cls``:
    a call of the program (the sandbox calls what ``name`` is there). Unless it returned an instance of ``cls``
    (``"made"`` records: the harness writes an exception a call returned as a raised one), the program is not as
    described: the case fails, as a call of a function described as a class would fail in CPython's test."""
    made = session.call(name, args, kwargs)
    if session.pending or isinstance(made, cls):  # a placeholder while results are unknown: the pass goes on
        return made
    session.rejected = f"{name}() made no instance of the exception class the program described {name} as"
    raise session.stop
