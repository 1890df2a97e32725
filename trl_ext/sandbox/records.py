"""Strict parsing of the per-case records a judged run writes on stdout (untrusted input: the program's side).

The harness writes one marker-prefixed JSON record per case, in case order: the k-th record carries ``"i": k``.
Anything else on a marker line (a negative, repeated, skipped or out-of-range index, malformed JSON, an unknown
field or a field of the wrong type) is a forgery or a garbled channel, and makes the whole run invalid: the
program then passes no case. Every function here is total: it returns or records a reason, it never raises on
what the program wrote.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from trl_ext.sandbox import program_exceptions, replay
from trl_ext.sandbox.plain_encode import text_of

STDIO_STATUSES = frozenset({"ok", "timeout", "runtime_error", "memory", "output_limit"})
_STDIO_KEYS = frozenset({"i", "status", "out"})
_VALUE_KEYS = (frozenset({"i", "ok", "value"}), frozenset({"i", "ok", "value", "upd"}))
_RAISED_KEYS = frozenset({"i", "ok", "raised"})
_RAISED_MORE = frozenset({"exc", "upd", "cls", "attrs", "made"})  # each optional ("made": returned, not raised)
_MAX_NAME = 64  # an exception class name


def _load(text: bytes) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # malformed, not UTF-8, or nested past the scanner's recursion limit
        return None


def _stdio_record(record: dict) -> dict | None:
    if record.keys() != _STDIO_KEYS or type(record["status"]) is not str or type(record["out"]) is not str:
        return None
    if record["status"] not in STDIO_STATUSES:
        return None
    try:
        output = base64.b64decode(record["out"], validate=True)
    except (ValueError, binascii.Error):
        return None
    return {"i": record["i"], "status": record["status"], "output": output.decode("utf-8", errors="replace")}


_ENV_TYPES = {"out": str, "err": str, "more": bool, "in": int, "lost": bool}


def _call_environment(record: dict) -> dict | None:
    """``record`` without the call's duration ("dt", seconds, written by the harness) and what the call did to the
    test's streams ("env": printed text "out"/"err", "more" when past the cap, characters of stdin read "in",
    "lost" when the program broke the buffers); None when either is malformed. Put back by ``_call_record``."""
    record = dict(record)
    took, env = record.pop("dt", 0.0), record.pop("env", {})
    if type(took) not in (int, float) or not 0 <= took < 1e9 or type(env) is not dict:
        return None
    if type(record.pop("halt", False)) is not bool:  # the harness ended the run after this call (``_halts_here``)
        return None
    if record.pop("dc", True) is not True:  # the program changed decimal's context (``replay_env.DecimalWatch``)
        return None
    texts = {key: env[key] for key in ("out", "err") if type(env.get(key)) is dict}  # with surrogates: {"u": parts}
    for text in texts.values():
        try:
            text_of(text["u"] if text.keys() == {"u"} else None)  # checked here, joined by ``replay_env``
        except ValueError:
            return None
    if (
        not all(type(value) is _ENV_TYPES.get(key) or key in texts for key, value in env.items())
        or env.get("in", 0) < 0
    ):
        return None
    return record


def _call_record(record: dict, memo: dict) -> dict | None:
    """A call record with its value decoded (``"invalid"`` when the value is no plain data: the case fails).
    ``memo``: {} for a call test's; an assert test's names the run's objects, which only its evaluation holds:
    here its shape is checked (``plain_data.decode_record``, "loose")."""
    core = _call_environment(record)
    if core is None:
        return None
    checked = _call_core(core, memo)
    if checked is None or checked is core:
        return checked and record
    checked.update({key: record[key] for key in ("dt", "env", "halt", "dc") if key in record})
    return checked


def _call_core(record: dict, memo: dict) -> dict | None:
    keys, ok = record.keys(), record.get("ok")
    if ok is True and keys in _VALUE_KEYS:
        checked = dict(record)
        try:  # the updates and the value, as one record (the value may name the updated objects)
            checked["decoded"] = replay.decode_record(record, dict(memo))
        except ValueError:
            return {"i": record["i"], "ok": False, "invalid": True}
        return checked
    if ok is not False:
        return None
    if (
        _RAISED_KEYS <= keys <= _RAISED_KEYS | _RAISED_MORE
        and type(record["raised"]) is str
        and record["raised"].isidentifier()
        and record.get("made", True) is True
    ):
        return record if len(record["raised"]) <= _MAX_NAME and _exception_args(record, memo) else None
    if keys == {"i", "ok", "unencodable"} and record["unencodable"] is True:
        return record
    return None


def _exception_args(record: dict, memo: dict) -> bool:
    """Whether a raised record's updates and exception arguments (both optional) are plain data."""
    memo = dict(memo)
    try:
        args = replay.decode_record(record, memo)
        program_exceptions.exception_details(
            record, memo
        )  # the program classes and builtin attributes ("cls", "attrs")
    except Exception:  # noqa: BLE001 - the program's data: whatever fails in reading it makes it malformed
        return False
    return "exc" not in record or type(args) is list


_BUILTIN_KINDS = (["shadow"], ["builtin"])


def _described_names(record: dict) -> list | None:
    """The harness's description of the test's names ({"names": [[name, description], ...]}), checked: a function
    ["fn", __name__, __doc__], an exception class ["exc", chain, builtin base, __doc__], or a builtin name the
    program rebinds ["shadow"] or keeps ["builtin"]; None if malformed. The program wrote it (the harness writes it
    after the program's module ran, in the same process): the judge makes every kind harmless where it is false
    (``program_exceptions.stand_ins``)."""
    names = record.get("names") if record.keys() == {"names"} else None
    if type(names) is not list or len(names) > 1000:
        return None
    for entry in names:
        if (
            type(entry) is not list
            or len(entry) != 2
            or not program_exceptions._identifier(entry[0])
            or type(entry[1]) is not list
        ):
            return None
        what = entry[1]
        if what in _BUILTIN_KINDS:  # a builtin name the program's module rebinds, or keeps (most entries: first)
            continue
        doc = what[-1] if what else None
        if doc is not None and (type(doc) is not str or len(doc) > 100_000):
            return None
        if what[:1] == ["fn"] and len(what) == 3 and program_exceptions._identifier(what[1]):
            continue
        if (
            what[:1] != ["exc"]
            or len(what) != 4
            or not program_exceptions._is_chain(what[1])
            or type(what[2]) is not str
        ):
            return None
        if what[2] not in program_exceptions._EXCEPTIONS:
            return None
    return names


class RecordStream:
    """The records of one run, parsed as its stdout grows (``feed`` is given successive prefixes of stdout and
    parses each complete line once: linear in the output, however often it is called)."""

    def __init__(self, marker: str, mode: str, n_cases: int, described: bool = False) -> None:
        """``mode``: "stdio", "calls" (a call test's) or "live" (an assert test's calls)."""
        self.marker, self.mode, self.n_cases = marker.encode(), mode, n_cases
        self.described = described  # a run whose payload asked for the program's description ("describe")
        self.records: list[dict] = []
        self.invalid = ""  # why the run is invalid ("" when it is not)
        self.names: list | None = None  # calls mode: what the test's names are in the program (before record 0)
        self._offset = 0

    def feed(self, stdout: bytes | bytearray | str) -> list[dict]:
        """The records completed since the last call (none once the run is invalid). ``stdout``: the whole output so
        far (a run's growing buffer, read here from its last line's end back to the last call's: never whole)."""
        data = stdout.encode("utf-8", errors="surrogateescape") if isinstance(stdout, str) else stdout
        end = data.rfind(b"\n", self._offset) + 1
        if end <= self._offset:
            return []
        chunk, self._offset = bytes(data[self._offset : end]), end
        new: list[dict] = []
        for line in chunk.split(b"\n"):
            if self.invalid or not line.startswith(self.marker):
                continue
            record = self._parse(line[len(self.marker) :])
            if record is None:
                continue
            self.records.append(record)
            new.append(record)
        return new

    def _parse(self, text: bytes) -> dict | None:
        record, index = _load(text), len(self.records)
        if self.described and index == 0 and self.names is None and type(record) is dict and "i" not in record:
            self.names = _described_names(record)  # once, before the first record
            if self.names is None:
                self.invalid = "the program's description is malformed"
            return None
        if type(record) is not dict or type(record.get("i")) is not int:
            self.invalid = "a result record is malformed"
        elif record["i"] != index or index >= self.n_cases:
            self.invalid = f"a result record claims another case than case {index} of {self.n_cases}"
        else:
            memo = {"loose": True, "any_order": True} if self.mode == "live" else {"any_order": True}
            checked = _stdio_record(record) if self.mode == "stdio" else _call_record(record, memo)
            if checked is not None:
                return checked
            self.invalid = f"result record {index} does not match the record format"
        return None


RERUN_DETAIL = (  # ``RunHistory.conflicts``: the detail of the unsupported_test
    "the program's results differ between sandbox runs of the same calls, or a run answered a call after an "
    "earlier run had shown the program a call that comes later (results may depend on calls not made yet; or on "
    "os.urandom, the clock, id())"
)


class RunHistory:
    """What the program was shown and answered in the earlier sandbox runs of one assert test. A program may carry
    data from one run to the next (the host page cache, timing), so a run's records are used only where that could
    not help: a call answered before (the same position after the same calls, or the same call of the test, n-th
    of its kind) must get the same record again (the first answer is binding; the duration "dt" may differ), and a
    call answered for the first time must come after every call of the test an earlier run was shown (a pass goes
    on past results it does not know yet: a later run may place a call it showed before further down)."""

    def __init__(self) -> None:
        self.calls: list = []
        self.results: list = []
        self.shown: dict[str, int] = {}  # a test call (name, args, kwargs) -> how often one run was shown it
        self.answered: dict[tuple, dict] = {}  # (test call, n-th, the test's changes) -> its first record
        self.numbers: set[int] = set()  # the class numbers the bound records use (``_Renaming``)

    def conflicts(self, calls: list, results: list) -> bool:
        """Whether the run's ``results`` for ``calls`` break the rules above (then the run is added as seen). Two
        records are the same up to a consistent renaming of the program's exception class numbers (``_Renaming``):
        a class is numbered where it first crosses, so the calls a run makes first shift the numbers."""
        conflict, same, seen, unseen, shows = False, True, {}, sum(self.shown.values()), {}
        last_shown, renaming, new = _last_shown(results), _Renaming(self.numbers), []
        for k, (call, record) in enumerate(zip(calls, results)):
            same = same and k < min(len(self.calls), len(self.results)) and self.calls[k] == call  # a halted run
            # has fewer results than calls (red team round 12, R12J-6: an IndexError out of the reward)
            # an iterator's step ("") shows nothing of the test, unless it sends a value into a generator or carries
            # the test's changes to objects or streams (red team round 14, R14J-5: a step's changes were not keyed)
            key = json.dumps(call[:3]) if call[0] or len(call[1]) > 2 or call[3] or call[4:] else None
            if key is not None:
                seen[key] = nth = seen.get(key, 0) + 1
                unseen -= nth <= self.shown.get(key, 0)
                if k <= last_shown and (call[1] or call[2] != {"d": []} or call[3] or call[4:]):
                    shows[key] = nth  # it shows the test's data: arguments, changes to objects or streams
            if record.get("missing"):
                continue
            # the same call: also the same changes of the test before it (to its objects, its streams)
            answer = (key, nth, json.dumps(call[3:])) if key is not None else None
            first = self.answered.get(answer) if answer is not None else None
            if same and not self.results[k].get("missing"):
                first = self.results[k]
            if first is not None:
                conflict |= not renaming.matches(first, record)
            elif unseen > 0:  # answered now, after an earlier run showed a call that comes later here
                conflict = True
            if answer is not None and answer not in self.answered:
                new.append((answer, k))
        for key, count in shows.items():
            self.shown[key] = max(count, self.shown.get(key, 0))
        bound = [record if record.get("missing") else renaming.bound(record) for record in results]
        self.answered.update({answer: bound[k] for answer, k in new})
        self.calls, self.results = calls, bound
        return conflict


class _Renaming:
    """A run's program class numbers -> the bound records' (those of the runs before), one to one. A record is
    the same as a bound one when all but its class numbers are equal and its numbers map consistently; the run's
    records are kept renamed (a number never met before gets one no bound record uses)."""

    def __init__(self, used: set) -> None:
        self.used, self.forward, self.backward = used, {}, {}
        self.next_free = max(used, default=-1) + 1  # kept, not recomputed: max() per number was quadratic

    def matches(self, bound: dict, record: dict) -> bool:
        theirs, ours = [], []
        shape = _renumbered(_without_duration(bound), lambda n: theirs.append(n) or -1)
        if shape != _renumbered(_without_duration(record), lambda n: ours.append(n) or -1) or shape is None:
            return False
        return len(theirs) == len(ours) and all(self._pair(a, b) for a, b in zip(ours, theirs))

    def _pair(self, ours: int, theirs: int) -> bool:
        if self.forward.get(ours, theirs) != theirs or self.backward.get(theirs, ours) != ours:
            return False
        self.forward[ours], self.backward[theirs] = theirs, ours
        self._use(theirs)
        return True

    def _use(self, number: int) -> None:
        self.used.add(number)
        self.next_free = max(self.next_free, number + 1)

    def bound(self, record: dict) -> dict:
        return _renumbered(record, self._number) or record

    def _number(self, ours: int) -> int:
        if ours not in self.forward:
            theirs = ours if ours not in self.used else self.next_free
            self.forward[ours], self.backward[theirs] = theirs, ours
            self._use(theirs)
        return self.forward[ours]


def _renumbered(record: dict, number: Any) -> dict | None:
    """``record`` with each class number of its exception chains ("cls", and those of "attrs"' chained
    exceptions) replaced by ``number(n)``; every other field as it is (None if a chain is not as checked)."""
    try:
        out = dict(record)
        if out.get("cls") is not None:
            out["cls"] = _chain_renumbered(out["cls"], number)
        if "attrs" in out:
            out["attrs"] = _attributes_renumbered(out["attrs"], number)
        return out
    except (TypeError, KeyError, IndexError, AttributeError, ValueError, RecursionError):
        return None


def _chain_renumbered(chain: Any, number: Any) -> Any:
    tagged = type(chain) is dict  # inside a value: {"t": [...]} tuples
    entries = []
    for entry in chain["t"] if tagged else chain:
        name, own, klass, bases, *qualname = entry["t"] if tagged else entry
        bases = [number(b) if type(b) is int else b for b in (bases["t"] if tagged else bases)]
        made = [name, own, number(klass), {"t": bases} if tagged else bases, *qualname]
        entries.append({"t": made} if tagged else made)
    return {"t": entries} if tagged else entries


def _attributes_renumbered(attributes: Any, number: Any) -> Any:
    if type(attributes) is not dict or type(attributes.get("d")) is not list:
        return attributes
    pairs = []
    for pair in attributes["d"]:
        nested = pair[1] if type(pair) is list and len(pair) == 2 else None
        if pair[0] in ("__cause__", "__context__") and type(nested) is dict and type(nested.get("t")) is list:
            raised, args, chain, inner = nested["t"]
            chain = None if chain is None else _chain_renumbered(chain, number)
            pair = [pair[0], {"t": [raised, args, chain, _attributes_renumbered(inner, number)]}]
        pairs.append(pair)
    return {**attributes, "d": pairs}


def _last_shown(results: list) -> int:
    """The position of the last call the run handed the program: the one after the last answered, unless the
    harness ended the run after that one ("halt")."""
    answered = [k for k, record in enumerate(results) if not record.get("missing")]
    if not answered:
        return 0
    return answered[-1] + (not results[answered[-1]].get("halt"))


def _without_duration(record: dict) -> dict:
    return {key: value for key, value in record.items() if key not in ("dt", "halt")}
