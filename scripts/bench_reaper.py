"""The cost of a run's clean-up when nothing of the run is left (the common case, once per run).

    python scripts/bench_reaper.py [--rounds 200]

``reaper.kill_session`` on a session with no process (a group kill, then ``stop_then_kill``: one scan of /proc and
of the pids made since) against one plain listing of /proc (``reaper.processes``), alternating, same process.
Prints both in milliseconds (median) and their ratio: about 1 means the clean-up costs one listing, as before
``stop_then_kill`` (red team round 10) did.
"""

from __future__ import annotations

import argparse
import statistics
import time

from trl_ext.sandbox import reaper

_NO_SESSION = 2**22 + 1  # above every pid_max: no process is in it


def _timed(call) -> float:
    start = time.perf_counter()
    call()
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    rounds = parser.parse_args().rounds
    listing, clean_up = [], []
    for _ in range(rounds):
        listing.append(_timed(reaper.processes))
        clean_up.append(_timed(lambda: reaper.kill_session(_NO_SESSION)))
    listed, cleaned = statistics.median(listing), statistics.median(clean_up)
    print(f"one /proc listing: {listed:.2f} ms; empty kill_session: {cleaned:.2f} ms; ratio {cleaned / listed:.2f}")


if __name__ == "__main__":
    main()
