"""The program's exceptions in the judge (evaluation worker side): the exception a program call raised, rebuilt
from its record (its builtin class, or the stand-in class of the program's own class, with its arguments and the
attributes CPython exposes), and the stand-in classes that the test's ``except MyErr`` catches.

Stdlib only, and no trl_ext import but the plain-data codec: ``replay.py`` imports it, in the judge as a module of
the package and in the evaluation worker (which runs ``replay.py`` by its path) as the file next to it.
"""

from __future__ import annotations

import builtins
import sys
from typing import Any

if __package__:  # the judge: a module of the package
    from trl_ext.sandbox.plain_data import decode
else:  # the evaluation worker: loaded by its path after plain_data.py (see replay.py)
    decode = sys.modules["trl_ext_plain_data"].decode

# KeyboardInterrupt and SystemExit too: a test's ``except Exception`` must not catch them
_EXCEPTIONS = {k: v for k, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)}


class ProgramError(Exception):
    """Raised by a stand-in whose call raised an exception that is not a builtin exception class."""


def _program_exception(
    raised: str, name: str, args: Any = None, details: tuple | None = None, classes: dict | None = None
) -> BaseException:
    """The exception the program's call raised (its builtin class, or the stand-in of its program class), with its
    arguments where they crossed and the attributes CPython exposes (``AttributeError.name``, ``__cause__``...)."""
    chain, attributes = details or (None, {})
    builtin = _EXCEPTIONS.get(raised)
    try:  # a few builtin exceptions need more arguments (UnicodeDecodeError): without them, ProgramError
        values = args if type(args) is list else [f"raised by the program's {name}()"]
        kind = _exception_class(chain, builtin, classes) if chain and builtin and classes is not None else builtin
        exc = type.__call__(kind or ProgramError, *values)  # past a stand-in's refusal to be made by the test
    except (TypeError, ValueError, OverflowError):
        return ProgramError(f"{raised} raised by the program's {name}()")
    for attribute, value in attributes.items():
        if attribute in ("__cause__", "__context__") and type(value) is tuple:  # (builtin name, args, chain, attrs)
            chain = [list(c) for c in value[2]] if value[2] else None
            value = _program_exception(value[0], name, value[1], (chain, value[3]), classes)
        if attribute == "__context__" and value == "__cause__":
            value = exc.__cause__  # one object, as after ``raise ... from`` inside its ``except``
        if attribute == "__dict__":  # what the program's __init__ stored, on an instance of its class's stand-in
            stand_in = isinstance(type(exc), _StandInClass)
            exc.__dict__.update({k: v for k, v in value if stand_in and _identifier(k) and k[:1] != "_"})
        elif isinstance(exc, _ATTRIBUTES[attribute]):
            setattr(exc, _STR if attribute == "__str__" else attribute, value)
    exc.__suppress_context__ = attributes.get("__suppress_context__") is True  # setting __cause__ set it
    return exc


_ATTRIBUTES = {"name": (AttributeError, NameError, ImportError), "obj": AttributeError, "path": ImportError}
_ATTRIBUTES.update(filename=OSError, filename2=OSError, __str__=BaseException, __suppress_context__=BaseException)
_ATTRIBUTES.update(__cause__=BaseException, __context__=BaseException, __dict__=BaseException)
_STR, _MAX_CLASSES = "_trl_ext_program_str", 64  # the program's own str() of an exception; classes per evaluation
_MAX_CLASS_NUMBER = 1 << 20  # the classes a run numbers (a record naming a bigger number is malformed)


class _StandInClass(type):
    """The metaclass of the stand-ins of the program's exception classes: a class that defines more than a
    docstring (an ``__init__``, a ``__str__``...) cannot be made by the test (its code is the program's)."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls._trl_ext_own:
            cls._trl_ext_refuse(f"the test makes an instance of the program's class {cls.__name__}")
        return super().__call__(*args, **kwargs)


def _exception_class(chain: list, builtin: type, classes: dict, doc: str | None = None) -> type:
    """The stand-in of the program's exception class ``chain[0]`` ([[name, own, number], ...] down to ``builtin``),
    one per class object of the run (its number, its bases' and its builtin base; never its name: two classes of
    one name are two classes): ``except MyErr`` catches it and its subclasses, as in CPython."""
    key = (tuple(number for _, _, number in chain), builtin.__name__)
    if key not in classes:
        if len(classes) >= _MAX_CLASSES:
            raise ValueError(f"more than {_MAX_CLASSES} program exception classes")
        parent = _exception_class(chain[1:], builtin, classes) if len(chain) > 1 else builtin

        def __str__(self: BaseException) -> str:
            text = self.__dict__.get(_STR)
            return text if type(text) is str else parent.__str__(self)

        members = {"__module__": "__main__", "__qualname__": chain[0][0], "__doc__": doc, "__str__": __str__}
        members.update(_trl_ext_own=chain[0][1], _trl_ext_refuse=classes.get("refuse"))
        classes[key] = _StandInClass(chain[0][0], (parent,), members)
    return classes[key]


def exception_details(record: dict, memo: dict) -> tuple[list | None, dict]:
    """(the program classes of a raised exception, its builtin attributes) from a raised record's "cls" and
    "attrs", decoded on their own (an attribute naming one of the run's objects crosses as a copy). ValueError if
    malformed."""
    chain, attributes = record.get("cls"), record.get("attrs")
    if chain is not None and not _is_chain(chain):
        raise ValueError("an exception's classes are [[name, own, number], ...]")
    own = {"nans": memo.get("nans", {}), "classes": memo.get("classes")}  # numbered on their own (the harness's too)
    attributes = {} if attributes is None else decode(attributes, 0, own)
    if not _attributes_ok(attributes):
        raise ValueError("an exception's attributes are builtin ones")
    return chain, attributes


def _attributes_ok(attributes: Any) -> bool:
    """Builtin attributes of plain data; ``__str__`` a str; a chained exception a tuple (builtin name, args or None,
    chain or None, attributes); ``__context__`` "__cause__" when it is that one; ``__suppress_context__`` a bool."""
    if type(attributes) is not dict or not all(type(k) is str and k in _ATTRIBUTES for k in attributes):
        return False
    for key in ("__cause__", "__context__"):
        value = attributes.get(key)
        if type(value) is tuple and len(value) == 4 and _identifier(value[0]) and type(value[1]) is list:
            chain = value[2] if value[2] is None or _tuples(value[2]) else ()
            if not _attributes_ok(value[3]) or not (chain is None or _is_chain([list(c) for c in chain])):
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
    """[[name, own, number], ...]: 1 to 16 classes, each a name, a bool and its number in the run (a small int)."""
    return (
        type(chain) is list
        and 0 < len(chain) <= 16
        and all(type(c) is list and len(c) == 3 and type(c[1]) is bool and _identifier(c[0]) for c in chain)
        and all(type(c[2]) is int and 0 <= c[2] < _MAX_CLASS_NUMBER for c in chain)
    )


def _identifier(name: Any) -> bool:
    return type(name) is str and len(name) <= 100 and name.isidentifier()
