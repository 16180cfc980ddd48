"""benchmarks/serve_bench.py's client parses a streamed HTTP response after it ends: every event
must come out whole, in order, stamped with the arrival of the piece that completed it, however
the transport split the bytes."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from serve_bench import sse_events  # noqa: E402

EVENTS = [b'data: {"choices":[{"text":"a"}]}', b'data: {"choices":[{"text":"b"}]}', b"data: [DONE]"]


def chunked(events: list[bytes], separator: bytes) -> bytes:
    """A chunked HTTP/1.1 200 response carrying one event per chunk, then the last chunk."""
    body = b"".join(b"%x\r\n%s\r\n" % (len(e + separator), e + separator) for e in events)
    return (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
            + body + b"0\r\n\r\n")


def split(raw: bytes, cuts: list[int]) -> list[tuple[float, bytes]]:
    """raw received as pieces ending at the given offsets; piece i arrives at time i."""
    bounds = [0, *cuts, len(raw)]
    return [(float(i), raw[a:b]) for i, (a, b) in enumerate(zip(bounds, bounds[1:]))]


@pytest.mark.parametrize("separator", [b"\n\n", b"\r\n\r\n"])
def test_events_are_whole_and_stamped_by_the_piece_that_completes_them(separator):
    raw = chunked(EVENTS, separator)
    first_end = raw.index(EVENTS[0]) + len(EVENTS[0]) + len(separator)   # past the first event's blank line
    second_mid = raw.index(EVENTS[1]) + 5                                  # inside the second event
    pieces = split(raw, [first_end - 1, first_end + 3, second_mid])
    got = list(sse_events(pieces))
    assert [e for _, e in got] == EVENTS
    assert [t for t, _ in got] == [1.0, 3.0, 3.0]   # the first completes in piece 1, the rest in the last


def test_one_piece_per_byte():
    raw = chunked(EVENTS, b"\n\n")
    got = list(sse_events(split(raw, list(range(1, len(raw))))))
    assert [e for _, e in got] == EVENTS
    ends = [raw.index(e) + len(e) + 1 for e in EVENTS]                    # the second newline's offset
    assert [t for t, _ in got] == [float(i) for i in ends]


def test_a_body_without_chunked_encoding_runs_to_the_end():
    raw = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + b"".join(e + b"\n\n" for e in EVENTS)
    assert [e for _, e in sse_events(split(raw, [40]))] == EVENTS


def test_a_status_other_than_200_is_an_error_naming_it():
    raw = b'HTTP/1.1 429 Too Many Requests\r\nContent-Length: 20\r\n\r\n{"error": "busy..."}'
    with pytest.raises(RuntimeError, match="429 Too Many Requests"):
        list(sse_events(split(raw, [])))
