"""A judged program (its source, run in the sandbox by ``test_harness_reach.py``): ``reached(root)`` walks the object
graph from one kind of root a program can name without frames, gc or ctypes and lists what of the harness it met
(a namespace, a harness function's code, a harness class). The test appends the harness's names."""

import builtins
import collections
import contextlib
import copyreg
import functools
import gc
import signal
import sys
import types
import weakref

HARNESS_NAMES: frozenset = frozenset()  # the test sets these three after the source
HARNESS_CLASSES: frozenset = frozenset()
HARNESS_MODULES = ("__main__", "_harness", "_harness_runtime")
HOOKS: frozenset = frozenset()


def roots(kind):
    if kind == "classes":
        return [object]
    if kind == "modules":
        return [sys.modules, builtins]
    if kind == "hooks":
        found = [sys.meta_path, sys.path_hooks, sys.path_importer_cache, gc.callbacks, copyreg.dispatch_table]
        found += [
            getattr(sys, name, None)
            for name in (
                "excepthook",
                "displayhook",
                "unraisablehook",
                "breakpointhook",
                "__excepthook__",
                "__displayhook__",
                "__unraisablehook__",
                "__breakpointhook__",
            )
        ]
        found += [sys.gettrace(), sys.getprofile(), sys.get_asyncgen_hooks()]
        found += [signal.getsignal(n) for n in range(1, signal.NSIG) if n not in (9, 19)]
        return found
    if kind == "raised":
        try:
            sys._getframe()
        except Exception as exc:
            return [exc, type(exc)]
        return []
    raise ValueError(kind)


def harness_namespace(space):
    return sum(1 for name in HARNESS_NAMES if name in space) >= 3


def children(obj):
    kind = type(obj)
    if isinstance(obj, type):
        yield from type.__subclasses__(obj)
        yield from type.__dict__["__dict__"].__get__(obj).values()
        yield from type.__dict__["__mro__"].__get__(obj)
        yield kind
        return
    if kind is types.MappingProxyType:
        yield from obj.keys()
        yield from obj.values()
        return
    if isinstance(obj, dict):  # OrderedDict, defaultdict, Counter too: their items as the base holds them
        yield from dict.keys(obj)
        yield from dict.values(obj)
        if kind is dict:
            return
    for base in (list, tuple, set, frozenset, collections.deque):
        if isinstance(obj, base):
            yield from base.__iter__(obj)
            if kind is base:
                return
    if isinstance(obj, collections.defaultdict):
        yield obj.default_factory
    if kind is types.FunctionType:
        yield obj.__globals__
        yield obj.__builtins__
        yield obj.__code__
        yield obj.__defaults__
        yield obj.__kwdefaults__
        yield obj.__dict__
        for cell in obj.__closure__ or ():
            with contextlib.suppress(ValueError):
                yield cell.cell_contents
        return
    if kind is types.CodeType:
        yield from obj.co_consts
        return
    if kind is types.MethodType:
        yield obj.__self__
        yield obj.__func__
        return
    if kind is types.BuiltinFunctionType:
        yield obj.__self__
        return
    if kind is types.ModuleType:
        yield vars(obj)
        return
    if kind is property:
        yield from (obj.fget, obj.fset, obj.fdel)
        return
    if kind in (staticmethod, classmethod):
        yield obj.__func__
        return
    if kind is functools.partial:
        yield from (obj.func, obj.args, obj.keywords)
        return
    if isinstance(obj, weakref.ref):
        yield obj()
        yield obj.__callback__
        return
    if isinstance(obj, BaseException):
        yield from (obj.args, obj.__cause__, obj.__context__)
    yield kind
    with contextlib.suppress(TypeError):
        yield vars(obj)
    for owner in type.__dict__["__mro__"].__get__(kind):  # __slots__ values
        for member in type.__dict__["__dict__"].__get__(owner).values():
            if type(member) is types.MemberDescriptorType:
                with contextlib.suppress(AttributeError):
                    yield member.__get__(obj, kind)
    with contextlib.suppress(TypeError):
        yield from weakref.getweakrefs(obj)


def finding(obj):
    kind = type(obj)
    if kind is dict and "__build_class__" in obj and obj is not vars(builtins):
        return "a copy of the builtins"  # the harness's own: the checks' builtin names
    if kind is dict and harness_namespace(obj):
        return "namespace " + ",".join(sorted(HARNESS_NAMES & set(k for k in obj if type(k) is str)))[:80]
    if kind is types.CodeType:
        harness_file = obj.co_filename in ("_harness.py", "_harness_runtime.py", "<string>")
        runtime = obj.co_filename == "_harness_runtime.py"
        if (runtime or (harness_file and obj.co_name in HARNESS_NAMES)) and obj.co_name not in HOOKS:
            return "code " + obj.co_filename + ":" + obj.co_name
    named = isinstance(obj, type) and type.__dict__["__name__"].__get__(obj) in HARNESS_CLASSES
    if named and obj.__dict__.get("__module__") in HARNESS_MODULES and obj.__name__ != "FrameDenied":
        return "class " + obj.__name__


def reached(kind, limit=600000):
    seen, keep, stack, found = set(), [], list(roots(kind)), []
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        if len(seen) >= limit:
            return found + ["walk cut at the limit"]
        seen.add(id(obj))
        keep.append(obj)
        what = finding(obj)
        if what is not None and what not in found:
            found.append(what)
        with contextlib.suppress(Exception):
            stack.extend(children(obj))
    return found
