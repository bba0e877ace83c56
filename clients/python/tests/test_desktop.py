"""Desktop calls of both clients against the shared busybox sandbox, which has no display: the
server's answers (NO_DISPLAY, a malformed action naming its field) arrive as typed errors.
The desktop itself (xterm, replay, forks) is tested in packages/server/test/desktop.test.ts."""

from __future__ import annotations

import base64
import json

import pytest
from conftest import Server

from sandtree import AsyncSandboxClient, ConflictError, SandboxClient, ValidationError
from sandtree import _desktop_calls as dc


def test_desktop_calls_on_a_sandbox_without_a_display(client: SandboxClient, sandbox_id: str) -> None:
    with pytest.raises(ConflictError) as nd:
        client.desktop_act(sandbox_id, {"type": "screenshot"})
    assert (nd.value.code, nd.value.status) == ("NO_DISPLAY", 409)
    with pytest.raises(ConflictError):
        client.desktop_events(sandbox_id)
    with pytest.raises(ValidationError) as bad:
        client.desktop_act(sandbox_id, {"type": "click", "x": 5})
    assert bad.value.details["field"] == "x"


@pytest.mark.asyncio
async def test_async_desktop_calls_on_a_sandbox_without_a_display(server: Server, sandbox_id: str) -> None:
    async with AsyncSandboxClient(api_key=server.key, base_url=server.url) as client:
        with pytest.raises(ConflictError) as nd:
            await client.desktop_info(sandbox_id)
        assert nd.value.code == "NO_DISPLAY"
        with pytest.raises(ValidationError) as bad:
            await client.desktop_act(sandbox_id, {"type": "key", "keys": ""})
        assert bad.value.details["field"] == "keys"


def test_an_action_answered_as_a_png_carries_its_event_in_a_header() -> None:
    # desktop_act_with_screen: the body is the PNG, the event is base64url JSON (unpadded) in a header.
    event = {"seq": 7, "action": {"type": "move", "x": 1, "y": 2}, "focused_window": {"title": "é ~?", "class": "a.B"}}
    raw = base64.urlsafe_b64encode(json.dumps(event).encode()).decode().rstrip("=")
    assert dc.event_from_headers({"x-sandtree-desktop-event": raw}) == event
