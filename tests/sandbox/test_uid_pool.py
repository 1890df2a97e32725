"""Sandbox uids as root (docs/sandbox.md, class 7): each trainer draws its own block of uids, inside what its user
namespace maps, avoiding blocks that visible processes use; an operator may fix the block."""

from __future__ import annotations

import threading

import pytest

from trl_ext.sandbox import limits
from trl_ext.sandbox.limits import _UID_FIRST, _UID_SLOTS, UID_BASE_ENV, choose_uid_base


def test_the_uid_map_gives_the_mapped_ranges(tmp_path):
    uid_map = tmp_path / "uid_map"
    uid_map.write_text("         0     100000      65536\n     70000     300000         10\n")
    assert limits._mapped_uid_ranges(str(uid_map)) == [range(0, 65536), range(70000, 70010)]
    assert limits._mapped_uid_ranges(str(tmp_path / "missing")) == [range(0, 2**32 - 1)]


def test_blocks_are_drawn_inside_the_mapped_uids_and_differ_between_trainers(monkeypatch):
    """A container's namespace that maps 65536 uids: every block lies inside it, above the first sandbox uid; the
    pid plays no part (trainers that are each pid 1 of their container used to share one block)."""
    monkeypatch.delenv(UID_BASE_ENV, raising=False)
    monkeypatch.setattr(limits, "_mapped_uid_ranges", lambda: [range(0, 65536)])
    monkeypatch.setattr(limits, "_uids_with_processes", set)
    bases = [choose_uid_base() for _ in range(200)]
    assert all(base >= _UID_FIRST and base + _UID_SLOTS <= 65536 for base in bases)
    assert len(set(bases)) > len(range(_UID_FIRST, 65536 - _UID_SLOTS + 1, _UID_SLOTS)) // 2


def test_a_block_that_visible_processes_use_is_skipped(monkeypatch):
    monkeypatch.delenv(UID_BASE_ENV, raising=False)
    monkeypatch.setattr(limits, "_mapped_uid_ranges", lambda: [range(0, 65536)])
    blocks = range(_UID_FIRST, 65536 - _UID_SLOTS + 1, _UID_SLOTS)
    free = blocks[len(blocks) // 2]
    busy = {base + 5 for base in blocks if base != free}  # one process in every block but one
    monkeypatch.setattr(limits, "_uids_with_processes", lambda: busy)
    assert {choose_uid_base() for _ in range(20)} == {free}


def test_an_operator_fixes_the_block_and_a_bad_value_is_named(monkeypatch):
    monkeypatch.setenv(UID_BASE_ENV, "200000")
    assert choose_uid_base() == 200000
    monkeypatch.setenv(UID_BASE_ENV, "root")
    with pytest.raises(ValueError, match=UID_BASE_ENV):
        choose_uid_base()


def test_the_pool_hands_out_distinct_uids_of_its_block(monkeypatch):
    monkeypatch.setenv(UID_BASE_ENV, "300000")
    pool = limits.UidPool()
    uids = [pool.acquire() for _ in range(_UID_SLOTS)]
    assert len(set(uids)) == _UID_SLOTS and all(300000 <= uid < 300000 + _UID_SLOTS for uid in uids)


def test_past_its_slots_a_run_waits_for_a_released_uid_and_never_shares_one(monkeypatch, caplog):
    monkeypatch.setenv(UID_BASE_ENV, "300000")
    pool = limits.UidPool()
    held = [pool.acquire() for _ in range(_UID_SLOTS)]
    got: list[int] = []
    with caplog.at_level("WARNING", logger="trl_ext.sandbox"):
        waiting = threading.Thread(target=lambda: got.append(pool.acquire()))
        waiting.start()
        waiting.join(0.3)
        assert waiting.is_alive() and got == []  # every uid is held: it waits, it takes none of them
        pool.release(held[5])
        waiting.join(10)
    assert got == [held[5]]
    assert sum("wait for one" in r.getMessage() for r in caplog.records) == 1


def test_a_pool_whose_uids_never_come_free_names_the_cause():
    pool = limits.UidPool(wait_s=0.05)
    pool._base_uid = 300000
    for _ in range(_UID_SLOTS):
        pool.acquire()
    with pytest.raises(RuntimeError, match="no uid of this process's block came free"):
        pool.acquire()
