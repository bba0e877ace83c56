"""Decoders of a streamed exec's answer (docs/api.md "Exec").

The client asks for the binary form (`application/vnd.sandtree.exec-stream`: records of a 1-byte
kind, a 4-byte big-endian length and that many bytes; kind 1 stdout, 2 stderr, 3 one JSON event)
and still reads NDJSON from a server that answers with it.
"""

from __future__ import annotations

import base64
import json
import struct
from typing import Any, Dict, List, Optional, Union

from .command_models import ExecEvent
from .errors import APIError, error_for

EXEC_STREAM_CONTENT_TYPE = "application/vnd.sandtree.exec-stream"
EXEC_STREAM_ACCEPT = f"{EXEC_STREAM_CONTENT_TYPE}, application/x-ndjson;q=0.5"
_HEADER = 5
_MAX_RECORD = 64 * 1024 * 1024
_STDOUT, _STDERR, _EVENT = 1, 2, 3


class ExecStreamFormatError(ValueError):
    """The answer is not a well-formed exec stream."""


def event_from_dict(d: Dict[str, Any]) -> Optional[ExecEvent]:
    """One JSON exec event; an error event is raised as its typed APIError."""
    kind = d.get("type")
    if kind == "error":
        err: APIError = error_for(str(d.get("code")), str(d.get("message")), status=0)
        raise err
    if kind in ("stdout", "stderr"):
        return ExecEvent(kind, data=base64.b64decode(d.get("data", "")))
    if kind == "started":
        return ExecEvent(kind, exec_id=d.get("exec_id"), pid=d.get("pid"))
    if kind == "exit":
        return ExecEvent(kind, exit_code=d.get("exit_code"), signal=d.get("signal"), timed_out=bool(d.get("timed_out")))
    return None  # an event type of a newer server


class BinaryExecDecoder:
    """Splits the binary form into events, whatever the chunking of the bytes it is fed."""

    def __init__(self) -> None:
        self._rest = b""

    def push(self, chunk: bytes) -> List[ExecEvent]:
        buf = self._rest + chunk if self._rest else chunk
        view = memoryview(buf)
        events: List[ExecEvent] = []
        at = 0
        while len(buf) - at >= _HEADER:
            kind, length = struct.unpack_from(">BI", buf, at)
            if kind not in (_STDOUT, _STDERR, _EVENT):
                raise ExecStreamFormatError(f"unknown exec stream record kind {kind}")
            if length > _MAX_RECORD:
                raise ExecStreamFormatError(f"an exec stream record of {length} bytes")
            end = at + _HEADER + length
            if end > len(buf):
                break
            payload = bytes(view[at + _HEADER : end])
            if kind == _EVENT:
                ev = event_from_dict(json.loads(payload))
                if ev is not None:
                    events.append(ev)
            else:
                events.append(ExecEvent("stdout" if kind == _STDOUT else "stderr", data=payload))
            at = end
        self._rest = bytes(view[at:])
        return events

    def finish(self) -> None:
        if self._rest:
            raise ExecStreamFormatError(f"the exec stream ended inside a record ({len(self._rest)} bytes left)")


class NdjsonExecDecoder:
    """The NDJSON form: one JSON event per line."""

    def __init__(self) -> None:
        self._rest = b""

    def push(self, chunk: bytes) -> List[ExecEvent]:
        lines = (self._rest + chunk).split(b"\n")
        self._rest = lines.pop()
        return [ev for ev in (self._line(line) for line in lines) if ev is not None]

    def finish(self) -> None:
        rest, self._rest = self._rest, b""
        ev = self._line(rest)
        if ev is not None:
            raise ExecStreamFormatError("the exec stream ended inside an event")

    @staticmethod
    def _line(line: bytes) -> Optional[ExecEvent]:
        return event_from_dict(json.loads(line)) if line.strip() else None


ExecDecoder = Union[BinaryExecDecoder, NdjsonExecDecoder]


def exec_decoder(content_type: Optional[str]) -> ExecDecoder:
    """The decoder of an answer with this Content-Type."""
    if content_type and content_type.startswith(EXEC_STREAM_CONTENT_TYPE):
        return BinaryExecDecoder()
    return NdjsonExecDecoder()
