"""sandtree_x11: the X11 calls of sandtree-desktop made in-process (ctypes over libX11 and libxdo,
the library behind xdotool), so an action spawns no xdotool, xprop or wmctrl: each of those
started under TCG costs tens of milliseconds, several per action.

`Conn` is one connection to the display, kept by a long-lived `serve` across actions. What it
answers matches what the tools print: `xdotool(argv)` runs the argv subset the helper uses with
the same libxdo calls xdotool makes (unknown argv: False, the caller runs xdotool itself), and
`windows()` reproduces `wmctrl -lGx` with the focus of `xprop -root _NET_ACTIVE_WINDOW`.
"""
import ctypes, time
from ctypes import POINTER, byref, c_char_p, c_int, c_long, c_uint, c_ulong, c_void_p

CURRENTWINDOW = 0
_ERROR_HANDLER = ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p)


def _load():
    x = ctypes.CDLL("libX11.so.6")
    xdo = ctypes.CDLL("libxdo.so.3")
    sig = {
        (x, "XDefaultRootWindow"): (c_ulong, [c_void_p]),
        (x, "XInternAtom"): (c_ulong, [c_void_p, c_char_p, c_int]),
        (x, "XGetWindowProperty"): (c_int, [c_void_p, c_ulong, c_ulong, c_long, c_long, c_int, c_ulong, POINTER(c_ulong),
                                            POINTER(c_int), POINTER(c_ulong), POINTER(c_ulong), POINTER(c_void_p)]),
        (x, "XFree"): (c_int, [c_void_p]),
        (x, "XGetGeometry"): (c_int, [c_void_p, c_ulong, POINTER(c_ulong), POINTER(c_int), POINTER(c_int), POINTER(c_uint),
                                      POINTER(c_uint), POINTER(c_uint), POINTER(c_uint)]),
        (x, "XTranslateCoordinates"): (c_int, [c_void_p, c_ulong, c_ulong, c_int, c_int, POINTER(c_int), POINTER(c_int),
                                               POINTER(c_ulong)]),
        (x, "XSync"): (c_int, [c_void_p, c_int]),
        (x, "XSetErrorHandler"): (c_void_p, [_ERROR_HANDLER]),
        (xdo, "xdo_new"): (c_void_p, [c_char_p]),
        (xdo, "xdo_move_mouse"): (c_int, [c_void_p, c_int, c_int, c_int]),
        (xdo, "xdo_mouse_down"): (c_int, [c_void_p, c_ulong, c_int]),
        (xdo, "xdo_mouse_up"): (c_int, [c_void_p, c_ulong, c_int]),
        (xdo, "xdo_click_window_multiple"): (c_int, [c_void_p, c_ulong, c_int, c_int, c_uint]),
        (xdo, "xdo_enter_text_window"): (c_int, [c_void_p, c_ulong, c_char_p, c_uint]),
        (xdo, "xdo_send_keysequence_window"): (c_int, [c_void_p, c_ulong, c_char_p, c_uint]),
        (xdo, "xdo_get_active_modifiers"): (c_int, [c_void_p, POINTER(c_void_p), POINTER(c_int)]),
        (xdo, "xdo_clear_active_modifiers"): (c_int, [c_void_p, c_ulong, c_void_p, c_int]),
        (xdo, "xdo_set_active_modifiers"): (c_int, [c_void_p, c_ulong, c_void_p, c_int]),
        (xdo, "xdo_get_mouse_location"): (c_int, [c_void_p, POINTER(c_int), POINTER(c_int), POINTER(c_int)]),
    }
    for (lib, name), (res, args) in sig.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    return x, xdo


class XdoFailed(Exception):
    pass


class Conn:
    """One display connection (libxdo's, whose Display* is the first field of its xdo_t)."""

    def __init__(self, display):
        self.x, self.xdo = _load()
        self.ctx = self.xdo.xdo_new(display.encode())
        if not self.ctx:
            raise OSError(f"cannot open display {display}")
        self.dpy = ctypes.cast(self.ctx, POINTER(c_void_p))[0]
        # Xlib's default handler exits the process on an X error (a window that closed while we
        # read it): ignore them, the calls below check their own results.
        self._on_error = _ERROR_HANDLER(lambda d, e: 0)
        self.x.XSetErrorHandler(self._on_error)
        self.root = self.x.XDefaultRootWindow(self.dpy)
        self._atoms = {}

    def sync(self):
        """Returns once the X server has handled every request sent (the input included)."""
        self.x.XSync(self.dpy, 0)

    # ---- actions: what `xdotool CMD...` would do, with its defaults ----

    def xdotool(self, argv):
        """Runs an xdotool argv (its chained commands) in-process; False when a command is not one
        this knows (nothing was done then: the caller runs xdotool)."""
        steps, i = [], 0
        while i < len(argv):
            cmd, i = argv[i], i + 1
            if cmd == "mousemove" and i + 1 < len(argv):
                steps.append((self._move, int(argv[i]), int(argv[i + 1])))
                i += 2
            elif cmd in ("click", "mousedown", "mouseup"):
                repeat = 1
                if cmd == "click" and argv[i] == "--repeat":
                    repeat, i = int(argv[i + 1]), i + 2
                steps.append((self._button, cmd, int(argv[i]), repeat))
                i += 1
            elif cmd == "sleep":
                steps.append((time.sleep, float(argv[i])))
                i += 1
            elif cmd == "key":
                clear = argv[i] == "--clearmodifiers"
                keys = argv[i + 1:] if clear else argv[i:]
                steps.append((self._keys, keys, clear))
                i = len(argv)
            elif cmd == "type" and argv[i:i + 1] == ["--delay"] and argv[i + 2:i + 3] == ["--"]:
                steps.append((self._type, float(argv[i + 1]), argv[i + 3:]))
                i = len(argv)
            else:
                return False
        for fn, *args in steps:
            fn(*args)
        self.sync()
        return True

    def _check(self, what, ret):
        if ret != 0:
            raise XdoFailed(f"xdotool {what} failed")

    def _move(self, x, y):
        self._check("mousemove", self.xdo.xdo_move_mouse(self.ctx, x, y, 0))

    def _button(self, cmd, button, repeat):
        if cmd == "click":  # xdotool click: 100 ms between repeats
            self._check(cmd, self.xdo.xdo_click_window_multiple(self.ctx, CURRENTWINDOW, button, repeat, 100_000))
        elif cmd == "mousedown":
            self._check(cmd, self.xdo.xdo_mouse_down(self.ctx, CURRENTWINDOW, button))
        else:
            self._check(cmd, self.xdo.xdo_mouse_up(self.ctx, CURRENTWINDOW, button))

    def _keys(self, keys, clear):
        mods, n = c_void_p(), c_int(0)
        if clear:
            self.xdo.xdo_get_active_modifiers(self.ctx, byref(mods), byref(n))
            self.xdo.xdo_clear_active_modifiers(self.ctx, CURRENTWINDOW, mods, n)
        try:
            for k in keys:  # xdotool key: 12 ms between keys
                self._check(f"key {k}", self.xdo.xdo_send_keysequence_window(self.ctx, CURRENTWINDOW, k.encode(), 12_000))
        finally:
            if clear:
                self.xdo.xdo_set_active_modifiers(self.ctx, CURRENTWINDOW, mods, n)
                ctypes.CDLL(None).free(mods)

    def _type(self, delay_ms, texts):
        for t in texts:
            self._check("type", self.xdo.xdo_enter_text_window(self.ctx, CURRENTWINDOW, t.encode(), int(delay_ms * 1000)))

    # ---- what the screen shows: pointer, windows ----

    def pointer(self):
        x, y, screen = c_int(), c_int(), c_int()
        self._check("getmouselocation", self.xdo.xdo_get_mouse_location(self.ctx, byref(x), byref(y), byref(screen)))
        return {"x": x.value, "y": y.value}

    def _atom(self, name):
        if name not in self._atoms:
            self._atoms[name] = self.x.XInternAtom(self.dpy, name.encode(), 0)
        return self._atoms[name]

    def _prop(self, win, name, want=0):
        """A property's (format, data bytes, item count); None when the window has none."""
        typ, fmt, n, after, data = c_ulong(), c_int(), c_ulong(), c_ulong(), c_void_p()
        r = self.x.XGetWindowProperty(self.dpy, win, self._atom(name), 0, 1 << 20, 0, want, byref(typ), byref(fmt),
                                      byref(n), byref(after), byref(data))
        if r != 0 or not data.value:
            return None
        try:
            if typ.value == 0:
                return None
            size = {8: 1, 16: ctypes.sizeof(ctypes.c_short), 32: ctypes.sizeof(c_long)}[fmt.value] * n.value
            return fmt.value, ctypes.string_at(data.value, size), n.value
        finally:
            self.x.XFree(data)

    def _windows_of(self, win, name):
        p = self._prop(win, name)
        if p is None or p[0] != 32:
            return None
        return list((c_ulong * p[2]).from_buffer_copy(p[1]))

    def _text(self, win, name):
        p = self._prop(win, name)
        return None if p is None else p[1].decode("utf-8", errors="replace")

    def active_window(self):
        ids = self._windows_of(self.root, "_NET_ACTIVE_WINDOW")
        return ids[0] if ids else 0

    def focused(self):
        """{title, class} of the focused window when it is a managed one (what windows() marks
        focused), else None; reads that one window only."""
        active = self.active_window()
        if not active:
            return None
        for w in self.windows(only=active):
            return {"title": w["title"], "class": w["class"]}
        return None

    def windows(self, only=None):
        """The managed windows, as `wmctrl -lGx` lists them (geometry included, its quirk too)."""
        ids = self._windows_of(self.root, "_NET_CLIENT_LIST")
        if ids is None:
            ids = self._windows_of(self.root, "_WIN_CLIENT_LIST")
        if ids is None:  # wmctrl fails until the first window is managed: no windows
            return []
        focused = self.active_window() if only is None else only
        out = []
        for wid in ids if only is None else [w for w in ids if w == only]:
            root, gx, gy, w, h, bw, depth = c_ulong(), c_int(), c_int(), c_uint(), c_uint(), c_uint(), c_uint()
            if not self.x.XGetGeometry(self.dpy, wid, byref(root), byref(gx), byref(gy), byref(w), byref(h), byref(bw),
                                       byref(depth)):
                continue  # closed meanwhile
            x, y, child = c_int(), c_int(), c_ulong()
            self.x.XTranslateCoordinates(self.dpy, wid, root.value, gx.value, gy.value, byref(x), byref(y), byref(child))
            cls = self._text(wid, "WM_CLASS")
            if cls is not None:  # "name\0class\0" prints as name.class (wmctrl's get_window_class)
                nul = cls.find("\0")
                if 0 <= nul < len(cls) - 1:
                    cls = cls[:nul] + "." + cls[nul + 1:]
                cls = cls.split("\0")[0]
            title = self._text(wid, "_NET_WM_NAME")
            if title is None:
                title = self._text(wid, "WM_NAME")
            out.append({
                "id": f"0x{wid:08x}", "x": x.value, "y": y.value, "width": w.value, "height": h.value,
                "class": cls or "N/A", "title": (title if title is not None else "N/A").lstrip(),
                "focused": wid == focused,
            })
        return out
