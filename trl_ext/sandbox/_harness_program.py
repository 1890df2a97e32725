"""What the judge learns of the program beyond its calls' values, written in the sandbox (``judge.harness_runtime``
compiles this file between ``_harness_values.py`` and ``_harness_runtime.py``, as one module; same rules: stdlib C
modules only, no trl_ext import).

- ``_describe``: what each name the test uses is in the program (a function: its ``__name__`` and ``__doc__``; an
  exception class: its chain of the program's classes down to the builtin one it derives from), so that the
  judge's stand-in for it is a function with that name and docstring, or a class (``except MyErr`` works).
- ``_exception_extra``: of a raised exception, its program classes and the attributes CPython exposes beyond its
  arguments (``AttributeError.name``, ``OSError.filename``...), as plain data.

All of it runs in the program's process, after the program, which can rewrite these functions: the judge checks
every class chain against the program's source and reads rebound builtins from it (``program_source``), so what
is written here can only add refusals (red team R8b-1).
"""

import builtins

if False:  # never runs: ``judge.harness_runtime`` compiles the three files as one module
    from trl_ext.sandbox._harness_values import (
        _BUILTIN_EXCEPTIONS,
        _CLASSES,
        _HEAPTYPE,
        _SEEN,
        _b64,
        _encode,
        _int_repr,
        _json_str,
        _number,
        _type,
    )

_ORIGINAL_BUILTINS = dict(vars(builtins))  # as the harness found them, before the program ran
_MAX_CHAIN = 16  # program exception classes between a raised one and its builtin base
_CUT = []  # set while an exception's attributes are written: a chain past their depth, or notes, was met
# class members that change nothing a stand-in class could get wrong (a class with others is "own": see the judge)
_PLAIN_MEMBERS = frozenset({"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__annotations__"})
_ATTRIBUTES = (  # what CPython's builtin exceptions hold beyond their args, by the class that holds it
    ("AttributeError", ("name", "obj")),
    ("NameError", ("name",)),
    ("ImportError", ("name", "path")),
    ("OSError", ("filename", "filename2")),
)


def _describe(namespace, names, listed=None):
    """One JSON line: {"names": [[name, description], ...]} for the names of ``names`` the program defines as a
    function (["fn", __name__, __doc__]) or an exception class (["exc", chain, builtin base, __doc__]), then the
    builtin names (those of ``listed`` only, where the judge sent them: the names its evaluation reads)."""
    _number_module_classes(namespace)
    entries = []
    for name in names if _type(names) is list else ():
        try:
            entry = _description(dict.get(namespace, name)) if _type(name) is str else None
        except BaseException:  # noqa: B036 - a hostile metaclass: the name stays a plain stand-in
            entry = None
        if entry is not None:
            entries.append("[" + _json_str(name) + "," + entry + "]")
    shadowed, kept = _shadowed_builtins(namespace)
    if _type(listed) is list:  # the other entries change no verdict: the judge drops them (``judge.read_entries``)
        wanted = {name for name in listed if _type(name) is str}
        shadowed, kept = [name for name in shadowed if name in wanted], [name for name in kept if name in wanted]
    entries += ["[" + _json_str(name) + ',["shadow"]]' for name in shadowed]
    entries += ["[" + _json_str(name) + ',["builtin"]]' for name in kept]
    return '{"names": [' + ",".join(entries) + "]}"


def _shadowed_builtins(namespace):
    """(the builtin names (not "_...") the program's module binds to another object, or whose builtin it replaced,
    the others), at most 900 in all: a test runs in the program's module in CPython, so ``except ValueError``
    would read the program's. The judge refuses a test that reads a builtin name not listed as kept, so a
    description the program rewrote (it runs in this process) cannot drop a "shadow" entry unseen."""
    shadowed, kept = [], []
    current = vars(builtins)
    for name, original in dict.items(_ORIGINAL_BUILTINS):
        if name[:1] != "_" and len(shadowed) + len(kept) < 900:
            mine = dict.get(namespace, name, original)
            changed = mine is not original or dict.get(current, name, original) is not original
            (shadowed if changed else kept).append(name)
    return shadowed, kept


def _number_module_classes(namespace, limit=4096):
    """Number the classes the program's module holds once loaded (and their program bases), in the module's order,
    before any call: a class's number is then the same in every sandbox run of the test, whichever calls a run
    makes first (the judge holds a call answered in an earlier run to the same record). A class first met later
    (made in a call, or held only by a function) is numbered when it first crosses."""
    for value in list(dict.values(namespace))[:limit]:
        if _type(value) is type and value.__flags__ & _HEAPTYPE:  # exactly ``type``: no metaclass code runs here
            for klass in value.__mro__:
                if klass.__flags__ & _HEAPTYPE:
                    _number(_CLASSES, klass)


def _description(value):
    kind = _type(value)
    if kind is _type(_b64) or kind is _type(len):
        return '["fn",' + _json_str(value.__name__) + "," + _doc_text(value.__doc__) + "]"
    if kind is type and issubclass(value, BaseException) and value.__flags__ & _HEAPTYPE:
        doc = type.__dict__["__doc__"].__get__(value)
        chain = _exception_chain(value)
        builtin = _json_str(_first_builtin(value))
        return '["exc",' + chain + "," + builtin + "," + _doc_text(doc) + "]"
    return None


def _doc_text(doc):
    """A docstring as a JSON string, or null: none, or one holding surrogates (which cross only as a tagged value,
    ``_json_str``; the stand-in then has no docstring, and a test reading it fails rather than the program)."""
    text = _json_str(doc) if _type(doc) is str else "null"
    return text if text[:1] == '"' else "null"


def _exception_chain(kind, tagged=False):
    """[[name, own, number, bases, qualname], ...]: the classes of ``kind``'s MRO but ``object`` and the builtin exceptions,
    ``kind`` first; ``own`` when the class defines more than a docstring (an ``__init__``, ``__str__``,
    attributes...), which the judge cannot rebuild; ``number``: the class object's number in the run (the judge's
    stand-ins are one per class object, not per name); ``bases``: its direct bases in order, each a later entry's
    number or a builtin's name, or null where the judge cannot rebuild it (a class of C code or of a library, whose
    real class the test may hold, or with a metaclass, whose hooks are not rebuilt), so the judge makes the same
    MRO or refuses the test. ``tagged``: as tuples, inside a value (tuples are never numbered, so the record's
    numbering stays the judge's)."""
    chain, start, end = [], '{"t": [' if tagged else "[", "]}" if tagged else "]"
    for klass in type.__dict__["__mro__"].__get__(kind):
        if _builtin(klass):
            continue
        members = type.__dict__["__dict__"].__get__(klass)
        rebuilt = _type(klass) is type and type.__dict__["__flags__"].__get__(klass) & _HEAPTYPE
        module = members.get("__module__")
        rebuilt = rebuilt and _type(module) is str and module == "__main__"  # the program's, not a library's
        own = not rebuilt or any(_type(key) is not str or key not in _PLAIN_MEMBERS for key in members)
        name = _json_str(type.__dict__["__name__"].__get__(klass))
        bases = [_base(base) for base in type.__dict__["__bases__"].__get__(klass)] if rebuilt else ["null"]
        bases = start + ",".join(bases) + end
        qualname = _json_str(type.__dict__["__qualname__"].__get__(klass))  # ``Errors.B``: the stand-in's too
        chain.append(start + name + "," + str(own).lower() + "," + _int_repr(_number(_CLASSES, klass)) + "," + bases)
        chain[-1] += "," + qualname + end
    if len(chain) > _MAX_CHAIN:
        raise TypeError("exception classes nested too deeply")
    return start + ",".join(chain) + end


def _chain_or_unknown(kind, tagged=False):
    """``_exception_chain``, or where it cannot be read (a hostile metaclass, too deep) one class of no known
    base: the judge refuses the test then, rather than raise a class with fewer relations."""
    try:
        return _exception_chain(kind, tagged)
    except BaseException:  # noqa: B036
        start, end = ('{"t": [', "]}") if tagged else ("[", "]")
        entry = start + '"Unknown",true,' + _int_repr(_number(_CLASSES, kind)) + "," + start + "null" + end
        entry += ',"Unknown"' + end
        return start + entry + end


def _builtin(klass):
    """Whether ``klass`` is ``object`` or a builtin exception class (the judge has its own)."""
    return klass is object or _BUILTIN_EXCEPTIONS.get(type.__dict__["__name__"].__get__(klass)) is klass


def _base(klass):
    if _builtin(klass):
        return _json_str(type.__dict__["__name__"].__get__(klass))
    return _int_repr(_number(_CLASSES, klass))


def _first_builtin(kind):
    for klass in kind.__mro__:
        if _BUILTIN_EXCEPTIONS.get(klass.__name__) is klass:
            return klass.__name__
    return "Exception"


def _exception_extra(exc):
    """', "cls": chain' for an exception of a program class and ', "attrs": {...}' with what it holds beyond its
    args (``_attributes``); either may be absent."""
    kind = _type(exc)
    # a program's class, or one of C code the judge refuses to replace by its base
    text = "" if _builtin(kind) else ', "cls": ' + _chain_or_unknown(kind)
    global _SEEN
    seen, _SEEN = _SEEN, {}  # numbered on their own: the judge decodes them alone (the run's numbering stays)
    del _CUT[:]
    try:
        attributes = _attributes(exc, kind, bool(text), 0)
    finally:
        _SEEN = seen
    if _CUT:  # the judge would rebuild a shorter chain, or no notes: no plain data (its case fails), never a pass
        raise TypeError("an exception chain deeper than 4, or an exception with notes")
    return text + (', "attrs": ' + attributes if attributes != '{"d": []}' else "")


def _attributes(exc, kind, program_class, depth):
    """'{"d": [[name, value], ...]}': the builtin attributes ``exc`` holds that are plain data, its program class's
    own ``str()`` (run here), and its ``__cause__``/``__context__`` (as [builtin name, args, chain, attributes]).
    The dict is numbered like any the judge decodes (a placeholder in the record's numbering)."""
    holder = []
    _SEEN[id(holder)] = (len(_SEEN), holder)
    pairs = []
    for owner, names in _ATTRIBUTES:
        klass = _BUILTIN_EXCEPTIONS[owner]
        for name in names if isinstance(exc, klass) else ():
            pairs.append(_attribute(name, klass.__dict__[name].__get__, exc, klass))
    if program_class and _owner(kind, "__str__").__flags__ & _HEAPTYPE:
        pairs.append(_attribute("__str__", lambda e, k: str(e), exc, kind))  # the program's own __str__, run here
    # what its __init__ or the program stored (``self.code = 7``, also on a builtin class's instance: red team
    # R8-13): name/value tuples (tuples are never numbered); one that cannot cross fails the call, never dropped
    stored = BaseException.__dict__["__dict__"].__get__(exc)
    pairs.append(_attribute("__dict__", _instance_attributes, exc, kind))
    if stored and not pairs[-1]:
        _CUT.append(depth)
    cause, context = (BaseException.__dict__[name].__get__(exc) for name in ("__cause__", "__context__"))
    if "__notes__" in BaseException.__dict__["__dict__"].__get__(exc) or (
        depth >= 4 and (cause is not None or context is not None)
    ):
        _CUT.append(depth)
    if depth < 4:
        pairs.append(_attribute("__cause__", lambda e, k: (_NESTED, cause), exc, depth))
        same = context is cause and cause is not None  # one object (raise ... from inside its except)
        pairs.append(
            '["__context__","__cause__"]'
            if same
            else _attribute("__context__", lambda e, k: (_NESTED, context), exc, depth)
        )
    if BaseException.__dict__["__suppress_context__"].__get__(exc) is True:
        pairs.append('["__suppress_context__",true]')
    return '{"d": [' + ",".join([pair for pair in pairs if pair]) + "]}"


def _instance_attributes(exc, kind):
    """The instance attributes of an exception, as ((name, value), ...) (at most 32, public names: TypeError
    otherwise)."""
    stored = BaseException.__dict__["__dict__"].__get__(exc)
    pairs = tuple((k, v) for k, v in dict.items(stored) if _type(k) is str and k.isidentifier() and k[:1] != "_")
    if len(pairs) != len(stored) - ("__notes__" in stored) or len(pairs) > 32:
        raise TypeError("an exception attribute the judge would not have")  # the call fails, never a pass
    return pairs or None


# (_NESTED, exception): a chained exception, encoded as a tuple (never numbered): (builtin name, args, chain,
# attributes). Plain data with a key of the runtime's: no class of the harness's (object.__subclasses__() lists
# every class, and a method's __globals__ would be this namespace: red team R10J-1).
_NESTED = object()


def _nested_text(nested, depth):
    exc = nested[1]
    if not isinstance(exc, BaseException):
        return None
    kind = _type(exc)
    head = '{"t": [' + _json_str(_first_builtin(kind)) + "," + _encode(list(BaseException.args.__get__(exc))) + ","
    chain = "null" if _builtin(kind) else _chain_or_unknown(kind, True)
    return head + chain + "," + _attributes(exc, kind, chain != "null", depth + 1) + "]}"


def _owner(kind, name):
    return next((k for k in kind.__mro__ if name in k.__dict__), object)


def _attribute(name, read, exc, klass):
    """'[name, value]' of one attribute, or "" when it is no plain data (the numbering of the record's objects
    is restored then: nothing half-encoded leaves a number the judge never sees)."""
    numbered = len(_SEEN)
    try:
        value = read(exc, klass)  # None: unset (set to None, OSError's str() would print it)
        nested = _type(value) is tuple and len(value) == 2 and value[0] is _NESTED
        text = _nested_text(value, klass) if nested else None if value is None else _encode(value)
        return "" if text is None else "[" + _json_str(name) + "," + text + "]"
    except BaseException:  # noqa: B036
        for key in list(_SEEN)[numbered:]:
            del _SEEN[key]
        return ""


_RAISED = []  # (exception, its snapshot): what the program raised to the test, watched for later changes
_MAX_RAISED = 64  # the first ones: each later record compares them all


def _watch_raised(exc):
    """Remember an exception the program raised to the test: the judge's copy is made once, from its record."""
    if len(_RAISED) < _MAX_RAISED:
        _RAISED.append((exc, _exception_state(exc)))


def _raised_changed():
    """Whether an exception the program raised earlier has changed since (its args replaced, an attribute set or a
    container it holds changed, its cause or context set): the test's copy would be stale (red team R8-3), so the
    call that changed it cannot be answered (its record is unencodable: the program fails it)."""
    return any(_exception_state(exc) != state for exc, state in _RAISED)


def _exception_state(exc):
    get = BaseException.__dict__
    args, stored = get["args"].__get__(exc), get["__dict__"].__get__(exc)
    links = (id(get["__cause__"].__get__(exc)), id(get["__context__"].__get__(exc)))
    # its args' items are the run's numbered objects (their changes cross); its attributes cross as copies
    return id(args), tuple(map(id, args)), _deep_state(stored, 0), links


def _deep_state(value, depth):
    """``value`` by identity, with the items of the containers it holds (a few levels, 1000 items each)."""
    kind = _type(value)
    if depth > 4:
        return id(value)
    if kind is list or kind is tuple:
        return id(value), len(value), tuple(_deep_state(item, depth + 1) for item in value[:1000])
    if kind is dict:
        items = list(dict.items(value))[:1000]
        return id(value), len(value), tuple((id(k), _deep_state(v, depth + 1)) for k, v in items)
    if kind is set:
        return id(value), frozenset(map(id, value))
    if kind is bytearray:
        return id(value), bytes(value)
    return id(value)
