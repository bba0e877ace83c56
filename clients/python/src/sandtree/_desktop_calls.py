"""Desktop calls (docs/desktop.md), described once for the sync and async clients.

Events and reports are the API's JSON objects (dicts): see DesktopEvent in docs/desktop.md.
"""

from __future__ import annotations

import base64
import json
from typing import Any, Dict, List, Mapping, Optional

from ._calls import Call, sandbox_path


def desktop_path(sandbox_id: str) -> str:
    return f"{sandbox_path(sandbox_id)}/desktop"


def info(sandbox_id: str) -> Call:
    return Call("GET", desktop_path(sandbox_id), {}, lambda d: d)


def act(sandbox_id: str, action: Dict[str, Any]) -> Call:
    # Not retried: an action is not idempotent (a retried "type" would type twice). No client
    # deadline: waits end on their own timeout_ms in the guest.
    return Call("POST", f"{desktop_path(sandbox_id)}/actions", {"json": action, "timeout": None}, lambda d: d)


def click_element(name: str, role: Optional[str], button: str, timeout_ms: int) -> Dict[str, Any]:
    action: Dict[str, Any] = {"type": "click_element", "name": name, "button": button, "timeout_ms": timeout_ms}
    if role is not None:
        action["role"] = role
    return action


def screenshot_kw() -> Dict[str, Any]:
    return {"headers": {"accept": "image/png"}, "timeout": None}


def event_from_headers(headers: Mapping[str, str]) -> Dict[str, Any]:
    """The event of an action answered as a PNG: x-sandtree-desktop-event, base64url JSON."""
    raw = headers.get("x-sandtree-desktop-event", "")
    event: Dict[str, Any] = json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
    return event


def screenshot_path(sandbox_id: str, sha256: str) -> str:
    return f"{desktop_path(sandbox_id)}/screenshots/{sha256}"


def events_kw(after_seq: int) -> Dict[str, Any]:
    return {"params": {"after_seq": after_seq}, "headers": {"accept": "application/x-ndjson"}}


def parse_events(text: str) -> List[Dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def replay(
    sandbox_id: str,
    source_sandbox_id: Optional[str] = None,
    events: Optional[List[Dict[str, Any]]] = None,
    after_seq: int = 0,
    channel_tolerance: Optional[int] = None,
    max_diff_ratio: Optional[float] = None,
) -> Call:
    body: Dict[str, Any] = {"after_seq": after_seq}
    if source_sandbox_id is not None:
        body["source_sandbox_id"] = source_sandbox_id
    if events is not None:
        body["events"] = events
    if channel_tolerance is not None:
        body["channel_tolerance"] = channel_tolerance
    if max_diff_ratio is not None:
        body["max_diff_ratio"] = max_diff_ratio
    return Call("POST", f"{desktop_path(sandbox_id)}/replay", {"json": body, "timeout": None}, lambda d: d)


def vnc(sandbox_id: str, writable: bool = False) -> Call:
    return Call("POST", f"{desktop_path(sandbox_id)}/vnc", {"json": {"writable": writable}}, lambda d: d)
