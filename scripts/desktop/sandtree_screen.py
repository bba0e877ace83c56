"""sandtree_screen: Xvfb's framebuffer (the XWD file it keeps in -fbdir), read through one mapping
kept across actions, its PNG encoding, and the waits for the screen to settle.

A frame is (width, height, bytes_per_line, pixels) with 32-bit little-endian pixels (B, G, R, x).
Comparing two frames is a memcmp of their pixels, so a poll costs a copy and a compare (a few
milliseconds under TCG), not a hash.
"""
import mmap, os, struct, time, zlib

# PNG's zlib level: 1 compresses a desktop (large flat areas) nearly as well as 3 in half the time.
PNG_LEVEL = 1


class Screen:
    def __init__(self, path):
        self.path = path
        self.mm = None
        self.key = None

    def _map(self):
        st = os.stat(self.path)
        key = (st.st_ino, st.st_size)
        if self.mm is not None and key == self.key:
            return
        if self.mm is not None:  # Xvfb started again: a new file
            self.mm.close()
        with open(self.path, "rb") as f:
            self.mm = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        self.key = key
        hs = struct.unpack(">I", self.mm[:4])[0]
        h = struct.unpack(">25I", self.mm[:100])
        self.width, self.height, bpp, self.bpl, ncolors = h[4], h[5], h[11], h[12], h[19]
        if bpp != 32:
            raise ValueError(f"unexpected framebuffer depth {bpp}")
        self.off = hs + ncolors * 12

    def grab(self):
        self._map()
        return self.width, self.height, self.bpl, self.mm[self.off:self.off + self.bpl * self.height]


# Rows per band: a band is deflated on its own (a fresh compressor, ended with a full flush), so a
# band that did not change since the last frame keeps its compressed bytes and its Adler-32.
BAND_ROWS = 16
_BASE = 65521


def _adler32_combine(a1, a2, len2):
    """zlib's adler32_combine: the Adler-32 of A + B from those of A and B and B's length."""
    rem = len2 % _BASE
    s1 = a1 & 0xFFFF
    s2 = (rem * s1) % _BASE
    s1 += (a2 & 0xFFFF) + _BASE - 1
    s2 += ((a1 >> 16) & 0xFFFF) + ((a2 >> 16) & 0xFFFF) + _BASE - rem
    if s1 >= _BASE:
        s1 -= _BASE
    if s1 >= _BASE:
        s1 -= _BASE
    if s2 >= _BASE << 1:
        s2 -= _BASE << 1
    if s2 >= _BASE:
        s2 -= _BASE
    return s1 | (s2 << 16)


class PngEncoder:
    """Frames to 8-bit RGB PNGs (rows with filter 0). The IDAT's zlib stream is made of bands
    deflated separately, each ended on a byte boundary, so the PNG of a frame depends on that
    frame alone (the same screen, the same bytes) while only the bands that changed since the
    previous frame cost any work: the rest keep their deflated bytes and checksums."""

    def __init__(self):
        self.bands = {}  # index -> (raw band, deflated, adler32 of its filtered rows, filtered length)

    def _band(self, width, rows, raw):
        rgb = bytearray(width * rows * 3)
        rgb[0::3] = raw[2::4]
        rgb[1::3] = raw[1::4]
        rgb[2::3] = raw[0::4]
        view, stride = memoryview(rgb), width * 3
        body = b"\x00".join([b""] + [view[y * stride:(y + 1) * stride] for y in range(rows)])
        c = zlib.compressobj(PNG_LEVEL, zlib.DEFLATED, -15)
        return c.compress(body) + c.flush(zlib.Z_FULL_FLUSH), zlib.adler32(body), len(body)

    def encode(self, width, height, bpl, raw):
        if bpl != width * 4:
            raw = b"".join(raw[y * bpl:y * bpl + width * 4] for y in range(height))
        band_bytes = width * 4 * BAND_ROWS
        parts, adler = [], 1
        for i, top in enumerate(range(0, height, BAND_ROWS)):
            piece = raw[top * width * 4:top * width * 4 + band_bytes]
            cached = self.bands.get(i)
            if cached is None or cached[0] != piece:
                cached = (piece,) + self._band(width, min(BAND_ROWS, height - top), piece)
                self.bands[i] = cached
            parts.append(cached[1])
            adler = _adler32_combine(adler, cached[2], cached[3])
        for i in [k for k in self.bands if k * BAND_ROWS >= height]:
            del self.bands[i]
        last = zlib.compressobj(PNG_LEVEL, zlib.DEFLATED, -15).flush()  # an empty final block
        idat = b"\x78\x01" + b"".join(parts) + last + struct.pack(">I", adler)

        def chunk(tag, data):
            return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

        ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
        return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


_ENCODER = PngEncoder()


def to_png(width, height, bpl, raw):
    """The frame as a PNG (PngEncoder, sharing this process's band cache)."""
    return _ENCODER.encode(width, height, bpl, raw)


def _runnable():
    """Tasks running or ready to run in the guest right now (this one included): /proc/loadavg."""
    try:
        with open("/proc/loadavg") as f:
            return int(f.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return 2**31


def settle(screen, quiet_ms, timeout_ms, calm_ms=None, poll_s=0.04):
    """Waits until the framebuffer stays unchanged for quiet_ms; returns (settled, frame).

    With calm_ms, it also ends once the screen stayed unchanged for calm_ms (three polls at least)
    while nothing else in the guest was runnable: what an action set off (the X server, the
    application, its shell over a pty) wakes its next step at once, so a guest with nothing to
    run and a screen that did not change has finished drawing; only timers (a toolkit's frame
    clock, a few ms) can still change it, which calm_ms covers."""
    start = time.monotonic()
    end = start + timeout_ms / 1000
    frame = screen.grab()
    since = calm_since = start
    calm_polls = 0
    while True:
        now = time.monotonic()
        if (now - since) * 1000 >= quiet_ms:
            return True, frame
        if calm_ms is not None and calm_polls >= 3 and (now - calm_since) * 1000 >= calm_ms:
            return True, frame
        if now >= end:
            return False, frame
        time.sleep(poll_s)
        idle = calm_ms is not None and _runnable() <= 1
        nxt = screen.grab()
        now = time.monotonic()
        if nxt[3] != frame[3]:
            frame, since = nxt, now
            calm_since, calm_polls = now, 0
        elif not idle:
            calm_since, calm_polls = now, 0
        else:
            calm_polls += 1
