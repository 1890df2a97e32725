"""Class 2: the trainer reads a run's output in time linear in its size (red team round 12, R12J-3: for every 64 KiB
it read, the run reader counted the case markers in, copied and re-scanned the whole output so far, so a right
stdio program printing a MiB of trailing blanks per case cost the trainer 17 s for 40 cases). Markers are looked
for in the new bytes only, the grader is given the output only when a line ended, and the record stream reads
from its last line's end."""

from __future__ import annotations

from trl_ext.sandbox import Limits, get_backend
from trl_ext.sandbox._process import Progress
from trl_ext.sandbox.records import RecordStream

MARKER = b"@@case@@"
CASES, BLANKS = 5, 1 << 20
PROGRAM = f"import sys\nfor k in range({CASES}):\n    sys.stdout.write('@@case@@' + ' ' * {BLANKS} + '\\n')\n"


def test_the_grader_is_given_the_output_once_a_line_ended_not_per_read(backend):
    seen: list[int] = []

    def stop(stdout) -> bool:
        seen.append(len(stdout))
        return False

    limits = Limits(timeout_s=20, max_output_bytes=8 << 20)
    progress = Progress(MARKER, 20.0, stop)
    result = get_backend(backend).launch({"mode": "script", "code": PROGRAM}, b"", limits, progress=progress)
    assert result.status == "ok" and result.stdout.count("@@case@@") == CASES
    assert 1 <= len(seen) <= CASES + 1  # was one call per 64 KiB read: ~80
    assert seen == sorted(seen) and seen[-1] <= CASES * (BLANKS + len(MARKER) + 1)


def test_the_record_stream_takes_the_runs_growing_buffer_and_parses_each_line_once():
    stream, out = RecordStream(MARKER.decode(), "stdio", 3), bytearray()
    for k in range(3):
        out += b"\n" + MARKER + b'{"i": %d, "status": "ok", "out": ""}' % k + b"\n" + b" " * 1000
        assert [record["i"] for record in stream.feed(out)] == [k]
        assert stream.feed(out) == []  # blanks after the last line: nothing new
    assert len(stream.records) == 3 and not stream.invalid
