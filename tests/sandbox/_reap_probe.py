"""Run as a script: become a child subreaper (unless already PID 1), grade programs that leave orphans on the given
backend, then print how many zombie children this process holds ("ZOMBIES n")."""

import ctypes
import os
import sys
import time

from trl_ext.sandbox import Limits, run, run_tests

if os.getpid() != 1:
    assert ctypes.CDLL(None).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
backend = sys.argv[1]
ORPHANS = [
    "print(1)",
    "import os, time\nif os.fork() == 0:\n    if os.fork() == 0:\n        time.sleep(30)\n    os._exit(0)\nprint(2)",
    "import os, time\nfor _ in range(3):\n    if os.fork() == 0:\n        time.sleep(30)\n        os._exit(0)\nprint(3)",
]
for code in ORPHANS:
    assert run(code, backend=backend, limits=Limits(timeout_s=5)).status == "ok"
assert (
    run("import os, time\nos.fork()\ntime.sleep(30)", backend=backend, limits=Limits(timeout_s=1)).status == "timeout"
)
spec = {"kind": "assert", "code": "assert double(2) == 4\nassert double(3) == 6"}
program = "import os, time\ndef double(x):\n    if os.fork() == 0:\n        time.sleep(30)\n    return 2 * x\n"
assert run_tests(program, spec, backend=backend).all_passed
stdio = {"kind": "stdio", "cases": [{"input": "1\n", "output": "1"}, {"input": "2\n", "output": "2"}]}
assert run_tests(ORPHANS[1].replace("print(2)", "print(input())"), stdio, backend=backend).all_passed
time.sleep(0.3)
zombies = []
for entry in os.listdir("/proc"):
    if entry.isdigit():
        try:
            with open(f"/proc/{entry}/stat") as file:
                stat = file.read()
        except OSError:
            continue
        state, ppid = stat[stat.rfind(")") + 2 :].split()[:2]
        if state == "Z" and int(ppid) == os.getpid():
            zombies.append(stat[: stat.rfind(")") + 1])
print("ZOMBIES", len(zombies), zombies[:5])
