"""Class 5: no capability under landlock as root, even with Python under a directory other uids cannot search
(red team round 10: CAP_DAC_READ_SEARCH used to be kept there, and let a run read other uids' files). Such roots
are handed over as descriptors and named through /proc/self/fd (``held_roots.py``)."""

import json
import os
import subprocess
import sys

import pytest

from trl_ext.sandbox import Limits, run
from trl_ext.sandbox.base import python_roots
from trl_ext.sandbox.held_roots import HELD_FDS_ENV, HeldRoots, closed

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="runs drop from root to a sandbox uid only as root")

_READ_AS_NOBODY = r"""
import os, sys
os.setgroups([]); os.setresgid(65534, 65534, 65534); os.setresuid(65534, 65534, 65534)
for path in sys.argv[1:]:
    try:
        print(open(path).read())
    except OSError as error:
        print("denied", error.errno)
"""


@pytest.fixture
def closed_tree(tmp_path):
    tmp_path.chmod(0o755)
    (tmp_path / "closed" / "tree").mkdir(parents=True)
    (tmp_path / "closed").chmod(0o700)
    (tmp_path / "closed" / "tree" / "data.txt").write_text("inside")
    (tmp_path / "closed" / "secret.txt").write_text("secret")
    return tmp_path / "closed"


@as_root
def test_a_closed_root_is_reached_through_its_descriptor_and_nothing_above_it(closed_tree):
    tree, open_dir = str(closed_tree / "tree"), "/usr/lib"
    assert closed(tree) and not closed(open_dir)
    held = HeldRoots([tree, open_dir])
    try:
        assert list(held.fds) == [tree]  # only the closed one is held
        fd = held.fds[tree]
        assert held.path(tree + "/data.txt") == f"/proc/self/fd/{fd}/data.txt"
        assert held.path(open_dir + "/x") == open_dir + "/x" and held.path(tree + "x") == tree + "x"
        assert held.env()[HELD_FDS_ENV] == str(fd)
        paths = [held.path(tree + "/data.txt"), tree + "/data.txt", held.path(tree) + "/../secret.txt"]
        done = subprocess.run(
            [sys.executable, "-c", _READ_AS_NOBODY, *paths], pass_fds=held.descriptors, capture_output=True, text=True
        )
    finally:
        held.close()
    assert done.stdout.split("\n")[:3] == ["inside", "denied 13", "denied 13"], done.stderr


def test_nothing_is_held_where_no_directory_is_closed_or_not_as_root(closed_tree):
    assert HeldRoots(["/usr/lib", "/usr/bin"]).fds == {}
    if os.geteuid() != 0:
        assert HeldRoots([str(closed_tree / "tree")]).fds == {}


_PROBE = r"""
import ctypes, json, os, sys
import decimal, fractions, xml.etree.ElementTree  # imported only now: through the prefix, after the drop
libc = ctypes.CDLL(None, use_errno=True)
class Header(ctypes.Structure): _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]
class Data(ctypes.Structure): _fields_ = [("e", ctypes.c_uint32), ("p", ctypes.c_uint32), ("i", ctypes.c_uint32)]
data = (Data * 2)()
assert libc.capget(ctypes.byref(Header(0x20080522, 0)), data) == 0
caps = [data[0].e, data[0].p, data[0].i, data[1].e, data[1].p, data[1].i]
held = [int(fd) for fd in os.environ.get("TRL_EXT_HELD_FDS", "").split(",") if fd]
moved = []  # a held descriptor replaced by the scratch directory would make the program's files the installation's
for fd in held:
    for move in (lambda: os.dup2(os.open(".", os.O_RDONLY), fd), lambda: os.close(fd)):
        try:
            move()
            moved.append(fd)
        except PermissionError:
            pass
    os.closerange(fd, fd + 1)  # close_range refused, then close(fd) refused: Python ignores it
    os.fstat(fd)
import colorsys  # still through the held prefix
print(json.dumps({"root": os.getuid() == 0, "capabilities": caps, "prefix": sys.prefix, "stdin": input(),
                  "held": held, "moved": moved}))
"""


@pytest.mark.parametrize("fork_server", ["0", "1"])
def test_a_landlock_run_keeps_no_capability_and_imports(fork_server, monkeypatch):
    from trl_ext.sandbox.landlock import unavailable_reason

    if unavailable_reason() is not None:
        pytest.skip(unavailable_reason())
    monkeypatch.setenv("TRL_EXT_SANDBOX_FORKSERVER", fork_server)
    result = run(_PROBE, "echoed\n", limits=Limits(), backend="landlock")
    assert result.status == "ok", result.stderr
    seen = json.loads(result.stdout)
    assert seen["root"] is False and seen["capabilities"] == [0] * 6 and seen["stdin"] == "echoed"
    # as root on this project's CI machine (/root/.pyenv); as non-root the trainer's uid reaches its own Python
    held = os.geteuid() == 0 and any(closed(root) for root in python_roots())
    assert seen["prefix"].startswith("/proc/self/fd/") == held == bool(seen["held"])
    assert seen["moved"] == []
