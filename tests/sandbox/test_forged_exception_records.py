"""Class 2 (red team R10J-2/4): a raised record's exception attributes the program forged raise nothing in the
judge. A chained exception whose attributes alias the mapping that holds them decodes to a cycle: the check is
bounded in depth and refuses it (it recursed without end). An attribute named twice is refused where the record is
checked (the check read the last pair, the renumbering of a later run read every pair and unpacked a malformed
one). Either makes the record malformed: that call of the program fails."""

from __future__ import annotations

import json

import pytest

from tests.sandbox.test_total_decoding import StubBackend
from trl_ext.sandbox import run_tests
from trl_ext.sandbox.records import RecordStream, RunHistory, _renumbered
from trl_ext.sandbox.replay import exception_details

CYCLE = '{"d": [["__cause__", {"t": ["ValueError", [], null, {"a": 0}]}]]}'  # its attributes: the outer mapping
REPEATED = '{"d": [["__cause__", {"t": [1]}], ["__cause__", null]]}'  # the first pair is no chained exception
DEEP = '{"d": [["__cause__", {"t": ["ValueError", [], null, INNER]}]]}'
PLAIN = '{"d": [["__cause__", {"t": ["ValueError", [], null, {"d": []}]}]]}'
FORGED = {"cycle": CYCLE, "repeated": REPEATED, "deep": DEEP.replace("INNER", '{"d": []}')}
for _ in range(12):
    FORGED["deep"] = DEEP.replace("INNER", FORGED["deep"])


def _record(attrs: str, index: int = 0) -> str:
    return '{"i": ' + str(index) + ', "ok": false, "raised": "ValueError", "attrs": ' + attrs + "}"


def _details(attrs: str) -> object:
    return exception_details(json.loads(_record(attrs)), {"nans": {}, "objects": {}, "classes": {}})


@pytest.mark.parametrize("name", list(FORGED))
def test_forged_attributes_are_malformed_not_an_exception(name):
    with pytest.raises(ValueError):
        _details(FORGED[name])
    stream = RecordStream("@@m@@", "calls", 1)
    assert stream.feed("\n@@m@@" + _record(FORGED[name]) + "\n") == [] and stream.invalid


def test_the_plain_chained_exception_is_still_read():
    assert _details(PLAIN)[1]["__cause__"][0] == "ValueError"
    stream = RecordStream("@@m@@", "calls", 1)
    assert len(stream.feed("\n@@m@@" + _record(PLAIN) + "\n")) == 1 and not stream.invalid


def test_the_renumbering_of_a_later_run_is_total_on_raw_records():
    """What ``RunHistory`` binds is checked first; its renumbering is total anyway (R10J-2 reached it)."""
    forged = json.loads(_record(REPEATED))
    assert _renumbered(forged, lambda n: n) is None
    history, call = RunHistory(), ["f", [{"i": "1"}], {"d": []}, []]
    assert history.conflicts([call], [forged]) is False
    assert history.conflicts([call], [forged]) is True  # not the same answer as the bound one: never equal


@pytest.mark.parametrize("name", list(FORGED))
def test_a_call_test_scores_zero_on_a_forged_record(name):
    stub = StubBackend()
    stub.lines = [_record(FORGED[name])]
    report = run_tests("def f(x): pass", {"kind": "call", "fn_name": "f", "cases": [{"args": [1], "expected": 1}]},
                       backend=stub)  # fmt: skip
    assert (report.passed, report.total, report.infra_error) == (0, 1, False)
