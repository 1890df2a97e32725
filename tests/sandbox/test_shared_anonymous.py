"""Class 6: shared anonymous memory counts or is refused. Its pages belong to a shmem object, not to a process's
page tables: MADV_DONTNEED (or a partial munmap, or a child that inherits the mapping and never touches it) takes
them out of every RSS while they stay allocated (red team round 10: 6 processes held 336 MiB against a 192 MiB
bound on every backend without a memory cgroup). A cgroup charges them; elsewhere the filter refuses the mapping."""

import errno

import pytest

from trl_ext.sandbox import Limits, forkserver, memory, run

from .._backends import EACH_BACKEND, sandbox_backend, sandbox_server  # noqa: F401

ZAPPED = """
import mmap, os, time
kids = []
for i in range(6):
    pid = os.fork()
    if pid == 0:
        m = mmap.mmap(-1, 56 << 20, flags=mmap.MAP_SHARED)
        for off in range(0, 56 << 20, 1 << 20):
            m[off:off + (1 << 20)] = b"Z" * (1 << 20)
            m.madvise(mmap.MADV_DONTNEED, off, 1 << 20)
        time.sleep(2)
        os._exit(0 if all(m[off] == 0x5A for off in range(0, 56 << 20, 1 << 20)) else 3)
    kids.append(pid)
print("HELD_ALL", [os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in kids])
"""

MAPPINGS = """
import mmap, os
def attempt(make):
    try:
        m = make()
        m[0] = 1
        return "mapped"
    except OSError as e:
        return e.errno
def dev_zero():
    fd = os.open("/dev/zero", os.O_RDWR)
    return mmap.mmap(fd, 1 << 20, flags=mmap.MAP_SHARED)
print(attempt(lambda: mmap.mmap(-1, 1 << 20)), attempt(lambda: mmap.mmap(-1, 1 << 20, flags=mmap.MAP_PRIVATE)),
      attempt(dev_zero))
"""


@EACH_BACKEND
@pytest.mark.parametrize("fork", ["0", "1"])  # per run, fork server
def test_zapped_shared_memory_never_holds_past_the_bound(fork, monkeypatch):
    monkeypatch.setenv(forkserver.FORKSERVER_ENV, fork)
    result = run(ZAPPED, limits=Limits(timeout_s=15.0, memory_mb=96))
    assert "HELD_ALL [0, 0, 0, 0, 0, 0]" not in result.stdout, (result.status, result.stdout)


@EACH_BACKEND
@pytest.mark.parametrize("fork", ["0", "1"])
def test_shared_anonymous_mappings_need_a_memory_cgroup(fork, monkeypatch):
    monkeypatch.setenv(forkserver.FORKSERVER_ENV, fork)
    result = run(MAPPINGS, limits=Limits(timeout_s=10.0))
    assert result.status == "ok", result.stderr
    shared, private, dev_zero = result.stdout.split()
    assert shared == ("mapped" if memory.available() else str(errno.EPERM))
    assert private == "mapped"  # what malloc and Python's own mmap(MAP_PRIVATE) use
    if not memory.available():  # the same shmem object through /dev/zero, which no run can then map
        assert dev_zero != "mapped"
