"""The streamed exec's decoders, byte for byte, at every chunking (no server needed)."""

from __future__ import annotations

import base64
import json
import os
import struct
from typing import List

import pytest

from sandtree import ExecEvent
from sandtree._exec_stream import (
    BinaryExecDecoder,
    ExecStreamFormatError,
    NdjsonExecDecoder,
    exec_decoder,
)
from sandtree.errors import SandboxNotRunningError


def record(kind: int, payload: bytes) -> bytes:
    return struct.pack(">BI", kind, len(payload)) + payload


def event(d: dict) -> bytes:
    return record(3, json.dumps(d).encode())


OUT = os.urandom(70_000)
ERR = b"warning\n"
STREAM = (
    event({"type": "started", "exec_id": "ex_1", "pid": 42})
    + record(1, OUT[:40_000])
    + record(2, ERR)
    + record(1, b"")
    + record(1, OUT[40_000:])
    + event({"type": "exit", "exit_code": 7, "signal": None, "timed_out": False})
)


def decode(decoder: BinaryExecDecoder, data: bytes, size: int) -> List[ExecEvent]:
    events: List[ExecEvent] = []
    for at in range(0, len(data), size):
        events += decoder.push(data[at : at + size])
    decoder.finish()
    return events


@pytest.mark.parametrize("size", [1, 2, 5, 6, 4096, 65536, len(STREAM)])
def test_binary_records_decode_the_same_at_any_chunking(size: int) -> None:
    events = decode(BinaryExecDecoder(), STREAM, size)
    assert (events[0].type, events[0].exec_id, events[0].pid) == ("started", "ex_1", 42)
    assert b"".join(e.data for e in events if e.type == "stdout") == OUT
    assert b"".join(e.data for e in events if e.type == "stderr") == ERR
    assert (events[-1].type, events[-1].exit_code, events[-1].timed_out) == ("exit", 7, False)


def test_a_stream_cut_inside_a_record_or_with_an_unknown_kind_is_an_error() -> None:
    d = BinaryExecDecoder()
    d.push(STREAM[:-3])
    with pytest.raises(ExecStreamFormatError):
        d.finish()
    with pytest.raises(ExecStreamFormatError):
        BinaryExecDecoder().push(record(9, b"x"))


def test_an_error_event_is_raised_as_its_typed_error() -> None:
    with pytest.raises(SandboxNotRunningError):
        BinaryExecDecoder().push(event({"type": "error", "code": "SANDBOX_NOT_RUNNING", "message": "gone"}))


def test_the_content_type_picks_the_decoder_and_ndjson_still_reads() -> None:
    assert isinstance(exec_decoder("application/vnd.sandtree.exec-stream"), BinaryExecDecoder)
    assert isinstance(exec_decoder("application/x-ndjson; charset=utf-8"), NdjsonExecDecoder)
    lines = (
        json.dumps({"type": "started", "exec_id": "ex_2", "pid": 1})
        + "\n"
        + json.dumps({"type": "stdout", "data": base64.b64encode(b"hi\n").decode()})
        + "\n"
        + json.dumps({"type": "exit", "exit_code": 0})
        + "\n"
    ).encode()
    d = NdjsonExecDecoder()
    events = [e for at in range(0, len(lines), 3) for e in d.push(lines[at : at + 3])]
    d.finish()
    assert [e.type for e in events] == ["started", "stdout", "exit"]
    assert events[1].data == b"hi\n"
