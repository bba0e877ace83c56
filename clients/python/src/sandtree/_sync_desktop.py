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

    def desktop_open_url(self, sandbox_id: str, url: str, timeout_ms: int = 60_000) -> Dict[str, Any]:
        """Opens url in the desktop's browser (Chromium), starting it when it is not running; its event
        (result: url, title, browser_started, start_ms, load_ms)."""
        return self.desktop_act(sandbox_id, {"type": "open_url", "url": url, "timeout_ms": timeout_ms})

    def desktop_click_element(
        self, sandbox_id: str, name: str, role: Optional[str] = None, button: str = "left", timeout_ms: int = 10_000
    ) -> Dict[str, Any]:
        """Clicks the page's element with this accessible name (and role, when given) with a real
        pointer click; its event (result: x, y, role, name)."""
        return self.desktop_act(sandbox_id, dc.click_element(name, role, button, timeout_ms))

    def desktop_page_text(self, sandbox_id: str) -> Dict[str, Any]:
        """The browser page's text, URL and title: {url, title, text, truncated}."""
        event = self.desktop_act(sandbox_id, {"type": "page_text"})
        result: Dict[str, Any] = event["result"]
        return result
