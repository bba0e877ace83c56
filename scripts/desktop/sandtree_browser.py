"""The browser actions of sandtree's desktop sessions (open_url, click_element, page_text).

Imported by sandtree-desktop (installed beside it in /usr/local/lib/sandtree-desktop). The browser
is Debian's Chromium started by `sandtree-browser` (the same launcher ctrl+alt+b runs), which
listens for the Chrome DevTools Protocol on the guest's loopback only. We speak it with a small
WebSocket client (python3's stdlib has none) to load a page, find an element in Chromium's own
accessibility tree (at-spi sees none of a page), and read the page's text. A click is a real X11
pointer click at the element's place on the screen, as a person's or an agent's would be.
"""
import base64, http.client, json, os, socket, struct, subprocess, time

PORT = 9222
LAUNCHER = "/usr/local/bin/sandtree-browser"
TEXT_LIMIT = 100_000
# Every call to the browser gets at least this long to answer, whatever is left of the action's
# timeout_ms (which bounds the wait for a page or an element): a busy browser under TCG is slow.
MIN_ANSWER_S = 15


class BrowserError(Exception):
    pass


def _http(method, path, timeout=5):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=timeout)
    try:
        c.request(method, path)
        r = c.getresponse()
        body = r.read()
        if r.status != 200:
            raise BrowserError(f"DevTools {path} answered HTTP {r.status}")
        return json.loads(body)
    finally:
        c.close()


def _listening():
    """Whether the browser listens; one that takes its connection but is slow to answer (busy
    under TCG) does, and must not be started a second time."""
    try:
        _http("GET", "/json/version", timeout=MIN_ANSWER_S)
        return True
    except TimeoutError:
        return True
    except (OSError, ValueError, BrowserError):
        return False


class Cdp:
    """One DevTools WebSocket (RFC 6455, text frames only, as CDP uses)."""

    def __init__(self, url, timeout):
        rest = url.split("://", 1)[1]
        hostport, path = rest.split("/", 1)
        host, port = hostport.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET /{path} HTTP/1.1\r\nHost: {hostport}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                           f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            self.buf += self._read()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise BrowserError(f"DevTools refused the WebSocket: {head[:120]!r}")
        self.next_id = 0
        self.events = []

    def _read(self):
        data = self.sock.recv(65536)
        if not data:
            raise BrowserError("the browser closed its DevTools connection")
        return data

    def _exact(self, n):
        while len(self.buf) < n:
            self.buf += self._read()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _send(self, opcode, payload):
        mask = os.urandom(4)
        n = len(payload)
        head = bytes([0x80 | opcode])
        head += bytes([0x80 | n]) if n < 126 else (struct.pack(">BH", 0x80 | 126, n) if n < 65536 else struct.pack(">BQ", 0x80 | 127, n))
        masked = (int.from_bytes(payload, "big") ^ int.from_bytes((mask * (n // 4 + 1))[:n], "big")).to_bytes(n, "big")
        self.sock.sendall(head + mask + masked)

    def _message(self):
        parts = []
        while True:
            b0, b1 = self._exact(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._exact(8))[0]
            mask = self._exact(4) if b1 & 0x80 else None
            data = self._exact(n)
            if mask:
                data = bytes(c ^ mask[i % 4] for i, c in enumerate(data))
            op = b0 & 0x0F
            if op == 8:
                raise BrowserError("the browser closed its DevTools connection")
            if op == 9:
                self._send(10, data)
                continue
            if op in (0, 1, 2):
                parts.append(data)
                if b0 & 0x80:
                    return json.loads(b"".join(parts))

    def call(self, method, deadline, **params):
        self.next_id += 1
        mid = self.next_id
        self._send(1, json.dumps({"id": mid, "method": method, "params": params}).encode())
        deadline = max(deadline, time.monotonic() + MIN_ANSWER_S)
        while True:
            self.sock.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                m = self._message()
            except socket.timeout:
                raise BrowserError(f"the browser did not answer {method} in time")
            if m.get("id") == mid:
                if "error" in m:
                    raise BrowserError(f"{method}: {m['error'].get('message', m['error'])}")
                return m.get("result", {})
            if "method" in m:
                self.events.append(m)

    def wait_event(self, name, deadline):
        while True:
            for i, e in enumerate(self.events):
                if e["method"] == name:
                    return self.events.pop(i)
            self.sock.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                m = self._message()
            except socket.timeout:
                raise BrowserError(f"timed out waiting for {name}")
            if "method" in m:
                self.events.append(m)

    def close(self):
        try:
            self._send(8, b"")
        except OSError:
            pass
        self.sock.close()


def start(env, run_dir, deadline):
    """Starts the browser unless it listens already; answers whether it started one."""
    if _listening():
        return False
    log = open(f"{run_dir}/browser.log", "ab")
    p = subprocess.Popen([LAUNCHER], env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    with open(f"{run_dir}/browser.pid", "w") as f:
        f.write(str(p.pid))
    while not _listening():
        if p.poll() is not None:
            raise BrowserError(f"the browser exited with {p.returncode} as it started (see {run_dir}/browser.log)")
        if time.monotonic() >= deadline:
            raise BrowserError("the browser did not start in time")
        time.sleep(0.2)
    return True


def page(deadline):
    """The DevTools connection of the browser's page (the one last used), opening one if none."""
    while True:
        try:
            pages = [t for t in _http("GET", "/json/list", timeout=MIN_ANSWER_S) if t.get("type") == "page"]
        except ConnectionRefusedError:
            raise BrowserError("the browser is not running (open a page with open_url first)")
        except (OSError, ValueError) as e:  # busy: it took the connection but answered late
            if time.monotonic() >= deadline:
                raise BrowserError(f"the browser did not answer: {e}")
            time.sleep(0.2)
            continue
        if not pages:
            pages = [_http("PUT", "/json/new?about:blank")]
        if pages[0].get("webSocketDebuggerUrl"):
            return Cdp(pages[0]["webSocketDebuggerUrl"], max(MIN_ANSWER_S, deadline - time.monotonic()))
        if time.monotonic() >= deadline:
            raise BrowserError("the browser's page is held by another DevTools client")
        time.sleep(0.2)


def _eval(cdp, expr, deadline):
    r = cdp.call("Runtime.evaluate", deadline, expression=expr, returnByValue=True)
    if "exceptionDetails" in r:
        raise BrowserError(f"the page's script failed: {r['exceptionDetails'].get('text', '')}")
    return r["result"].get("value")


def open_url(env, run_dir, url, timeout_ms):
    t0 = time.monotonic()
    deadline = t0 + timeout_ms / 1000
    started = start(env, run_dir, deadline)
    cdp = page(deadline)
    try:
        cdp.call("Page.enable", deadline)
        # Until the browser's page answers: a browser just started is busy for a while after its
        # DevTools port opens.
        start_ms = round((time.monotonic() - t0) * 1000)
        t1 = time.monotonic()
        nav = cdp.call("Page.navigate", deadline, url=url)
        if nav.get("errorText"):
            raise BrowserError(f"{url} did not load: {nav['errorText']}")
        if nav.get("loaderId"):  # a new document (not a jump within the page): wait for its load event
            cdp.wait_event("Page.loadEventFired", deadline)
        load_ms = round((time.monotonic() - t1) * 1000)
        cdp.call("Page.bringToFront", deadline)
        info = _eval(cdp, "({url: location.href, title: document.title})", deadline)
    finally:
        cdp.close()
    return {**info, "browser_started": started, "start_ms": start_ms, "load_ms": load_ms}


def _find(cdp, name, role, deadline):
    """The first element (not ignored, with a DOM node) named `name` (and of role `role`)."""
    while True:
        root = cdp.call("DOM.getDocument", deadline, depth=0)["root"]["nodeId"]
        params = {"nodeId": root, "accessibleName": name}
        if role:
            params["role"] = role
        nodes = cdp.call("Accessibility.queryAXTree", deadline, **params)["nodes"]
        for n in nodes:
            if not n.get("ignored") and n.get("backendDOMNodeId"):
                return n
        if time.monotonic() >= deadline:
            raise BrowserError(f"no element named {name!r}" + (f" with role {role!r}" if role else "") + " on the page")
        time.sleep(0.25)


def element_point(name, role, timeout_ms):
    """Where the element named `name` is on the screen (scrolled into view first), and its role;
    the caller moves the pointer there and confirms with `hovered` before clicking."""
    deadline = time.monotonic() + timeout_ms / 1000
    cdp = page(deadline)
    node = _find(cdp, name, role, deadline)
    backend = node["backendDOMNodeId"]
    cdp.call("DOM.scrollIntoViewIfNeeded", deadline, backendNodeId=backend)
    q = cdp.call("DOM.getBoxModel", deadline, backendNodeId=backend)["model"]["border"]
    cx, cy = sum(q[0::2]) / 4, sum(q[1::2]) / 4
    # The viewport's place on the screen. Chromium's own frame has no side border; a mouse event
    # (see `hovered`) corrects this estimate when the window manager decorates it differently.
    o = _eval(cdp, "[screenX + (outerWidth - innerWidth) / 2, screenY + outerHeight - innerHeight, devicePixelRatio]", deadline)
    _eval(cdp, "window.__sandtreeOffset = null; addEventListener('mousemove', e => {"
               " window.__sandtreeOffset = [e.screenX - e.clientX, e.screenY - e.clientY]; }, {once: true, capture: true}); 0", deadline)
    obj = cdp.call("DOM.resolveNode", deadline, backendNodeId=backend)["object"]["objectId"]
    role_value = (node.get("role") or {}).get("value", "")
    return {"cdp": cdp, "deadline": deadline, "object": obj, "client": (cx, cy), "offset": (o[0], o[1]), "scale": o[2] or 1,
            "role": role_value, "name": name}


def screen_xy(el, offset=None):
    ox, oy = offset or el["offset"]
    cx, cy = el["client"]
    return round((ox + cx) * el["scale"]), round((oy + cy) * el["scale"])


def hovered(el):
    """Whether the pointer is over the element now; and the viewport's offset a mouse event measured."""
    cdp, deadline = el["cdp"], el["deadline"]
    r = cdp.call("Runtime.callFunctionOn", deadline, objectId=el["object"], returnByValue=True,
                 functionDeclaration="function() { return [this.matches(':hover'), window.__sandtreeOffset]; }")
    over, offset = r["result"]["value"]
    return over, (tuple(offset) if offset else None)


def click_element(name, role, button, timeout_ms, xdotool):
    """Clicks the element named `name` with a real pointer click (xdotool, given as `xdotool(*args)`)
    once the pointer is confirmed over it; answers where on the screen, and the element's role."""
    el = element_point(name, role, timeout_ms)
    try:
        x, y = screen_xy(el)
        xdotool("mousemove", str(x), str(y))
        while True:
            over, offset = hovered(el)
            if not over and offset and offset != el["offset"]:
                # The estimate missed (a window manager frame): the mouse event told the real offset.
                el["offset"] = offset
                x, y = screen_xy(el)
                xdotool("mousemove", str(x), str(y))
                continue
            if over:
                break
            if time.monotonic() >= el["deadline"]:
                raise BrowserError(f"the pointer at ({x}, {y}) is not over the element named {name!r}: is another window above it?")
            time.sleep(0.1)
        xdotool("click", button)
    finally:
        el["cdp"].close()
    return {"x": x, "y": y, "role": el["role"], "name": name}


def page_text(timeout_ms):
    deadline = time.monotonic() + timeout_ms / 1000
    cdp = page(deadline)
    try:
        info = _eval(cdp, "({url: location.href, title: document.title,"
                          " text: document.body ? document.body.innerText : ''})", deadline)
    finally:
        cdp.close()
    text = info.get("text") or ""
    return {"url": info["url"], "title": info["title"], "text": text[:TEXT_LIMIT], "truncated": len(text) > TEXT_LIMIT}
