"""Desktop sessions: sandboxes created with display=..., image sandtree/desktop; docs/desktop.md
(SandboxClient's part)."""
# GENERATED from _async_desktop.py by scripts/unasync.py: edit _async_desktop.py and run it again.

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from . import _desktop_calls as dc
from ._sync_base import Base


class Desktop(Base):
    def desktop_info(self, sandbox_id: str) -> Dict[str, Any]:
        """The display's size and state; ConflictError (NO_DISPLAY) without one."""
        result: Dict[str, Any] = self._run(dc.info(sandbox_id))
        return result

    def desktop_act(self, sandbox_id: str, action: Dict[str, Any]) -> Dict[str, Any]:
        """Performs one action, e.g. {"type": "click", "x": 10, "y": 20}, and returns its event."""
        result: Dict[str, Any] = self._run(dc.act(sandbox_id, action))
        return result

    def desktop_screenshot(self, sandbox_id: str) -> bytes:
        """Takes a screenshot (recorded in the log) and returns the PNG."""
        r = self.client.send("POST", f"{dc.desktop_path(sandbox_id)}/actions", json={"type": "screenshot"}, **dc.screenshot_kw())
        return r.content

    def desktop_act_with_screen(self, sandbox_id: str, action: Dict[str, Any]) -> Tuple[Dict[str, Any], bytes]:
        """Performs one action and returns its event and the PNG of the screen after it, in one request
        (the PNG as the body's bytes, the event from a header)."""
        r = self.client.send("POST", f"{dc.desktop_path(sandbox_id)}/actions", json=action, **dc.screenshot_kw())
        return dc.event_from_headers(r.headers), r.content

    def desktop_screenshot_file(self, sandbox_id: str, sha256: str) -> bytes:
        """A screenshot of the log, by the sha256 its events name."""
        return (self.client.send("GET", dc.screenshot_path(sandbox_id, sha256))).content

    def desktop_events(self, sandbox_id: str, after_seq: int = 0) -> List[Dict[str, Any]]:
        """The session's event log (events with seq greater than after_seq)."""
        r = self.client.send("GET", f"{dc.desktop_path(sandbox_id)}/events", **dc.events_kw(after_seq))
        return dc.parse_events(r.text)

    def desktop_replay(self, sandbox_id: str, source_sandbox_id: Optional[str] = None, **kw: Any) -> Dict[str, Any]:
        """Replays a log (source_sandbox_id's, or events=[...]) into this sandbox; a report per step."""
        result: Dict[str, Any] = self._run(dc.replay(sandbox_id, source_sandbox_id, **kw))
        return result

    def desktop_vnc(self, sandbox_id: str, writable: bool = False) -> Dict[str, Any]:
        """Starts VNC in the guest (view-only unless writable) and exposes its port (token shown once)."""
        result: Dict[str, Any] = self._run(dc.vnc(sandbox_id, writable))
        return result
