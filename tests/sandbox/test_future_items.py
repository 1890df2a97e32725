"""Class 1: a program's process never holds a call or a stdio input it has not been given yet. The harness hands
each call to the program's process only once the previous call's result came back, and reads stdio input k only
just before it forks case k, so no later argument can be read from frames, the gc or raw memory."""

from __future__ import annotations

import os

from trl_ext.sandbox import Limits, run_tests

FAST = Limits(timeout_s=10.0)
N_CASES = 4

# ``later(arg)`` looks for the arguments of later cases. Each argument is "PREFIX|k|<16 hex>|": the program learns
# PREFIX from its own argument (its source holds none of it) and reports every k above its own that it finds in
# its frames, its gc-tracked objects, or anywhere in its own readable memory (a raw scan through ctypes).
PROBE = r'''
import gc, os, sys
try:
    import ctypes
except ImportError:  # the rlimit backend's interpreter may lack it: frames and the gc are still searched
    ctypes = None

def _pages():
    """(start, end) of the readable memory of this process: /proc/self/maps where it can be read, else a window
    around live objects probed page by page (a write from an unmapped page fails with EFAULT instead of crashing)."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                span, perms = line.split()[:2]
                if perms[0] == "r" and "[v" not in line:
                    start, end = (int(x, 16) for x in span.split("-"))
                    for page in range(start, end, 1 << 16):
                        yield page, min(end, page + (1 << 16))
            return
    except OSError:
        pass
    libc, (probe_r, probe_w) = ctypes.CDLL(None), os.pipe()
    libc.write.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
    anchors = {id(x) & ~0xFFF for x in (gc, sys.modules, bytearray(1 << 20), "x" * 100)}
    seen = set()
    for anchor in anchors:
        for page in range(max(anchor - (64 << 20), 4096), anchor + (64 << 20), 4096):
            if page in seen:
                continue
            seen.add(page)
            if libc.write(probe_w, page, 4096) == 4096:
                os.read(probe_r, 4096)
                yield page, page + 4096

def _found(text, prefix, own):
    found, at = set(), text.find(prefix + "|")
    while at >= 0:
        parts = text[at + len(prefix) + 1 : at + len(prefix) + 40].split("|")
        if len(parts) > 2 and parts[0].isdigit() and len(parts[1]) == 16 and int(parts[0]) > own:
            if all(c in "0123456789abcdef" for c in parts[1]):
                found.add(int(parts[0]))
        at = text.find(prefix + "|", at + 1)
    return found

def later(arg):
    prefix, own = arg.split("|")[0], int(arg.split("|")[1])
    found = set()
    try:  # the harness's audit hook denies frames, the gc and ctypes calls (FrameDenied, a ValueError)
        frame = sys._getframe()
    except ValueError:
        frame = None
    while frame is not None:
        found |= _found(repr(list(frame.f_locals.values())), prefix, own)
        frame = frame.f_back
    try:
        objects = gc.get_objects()
    except ValueError:
        objects = []
    for obj in objects:
        try:
            found |= _found(repr(obj), prefix, own)
        except Exception:
            pass
    raw = prefix.encode()
    try:  # raw memory through /proc/self/mem where it opens, else ctypes
        mem = os.open("/proc/self/mem", os.O_RDONLY)
    except OSError:
        mem = None
    try:
        for start, end in _pages() if ctypes is not None or mem is not None else ():
            try:
                chunk = os.pread(mem, end - start, start) if mem is not None else ctypes.string_at(start, end - start)
            except OSError:
                continue
            if raw in chunk:
                found |= _found(chunk.decode("latin-1"), prefix, own)
    except ValueError:  # ctypes denied: no raw scan without /proc
        pass
    return sorted(found)
'''


def _arguments() -> list[str]:
    prefix = "fut" + os.urandom(6).hex()
    return [f"{prefix}|{k}|{os.urandom(8).hex()}|" for k in range(N_CASES)]


def test_a_call_never_sees_the_arguments_of_later_calls(backend):
    tests = {"kind": "call", "fn_name": "later", "cases": [{"args": [a], "expected": []} for a in _arguments()]}
    report = run_tests(PROBE, tests, limits=FAST, stop_on_failure=False)
    assert report.all_passed, report


def test_an_assert_test_never_shows_a_call_the_later_asserts(backend):
    args = _arguments()
    report = run_tests(PROBE, {"kind": "assert", "code": "\n".join(f"assert later({a!r}) == []" for a in args)},
                       limits=FAST)  # fmt: skip
    assert report.all_passed, report


def test_a_stdio_case_never_sees_the_input_of_a_later_case(backend):
    program = PROBE + "print(later(sys.stdin.read().strip()))\n"
    tests = {"kind": "stdio", "cases": [{"input": a + "\n", "output": "[]"} for a in _arguments()]}
    report = run_tests(program, tests, limits=FAST, stop_on_failure=False)
    assert report.all_passed, report
