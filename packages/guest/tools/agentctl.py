#!/usr/bin/env python3
"""Debug client for the sandtree guest agent (docs/protocol.md) over QEMU's chardev socket.

  agentctl.py --sock S hello|ping [--count N]|bench
  agentctl.py --sock S exec [--shell CMD | -- ARGV...] [--env K=V] [--cwd D] [--user U]
                            [--timeout-ms N] [--stdin-file F] [--signal-after-ms N --signum S]
  agentctl.py --sock S write LOCAL REMOTE [--mode 0644] | read REMOTE LOCAL
  agentctl.py --sock S stat|list|mkdir [-p]|remove [-r] PATH
  agentctl.py --sock S shutdown
Exit status of `exec` is the guest process's exit code. Stdlib only.
"""
import argparse, json, os, socket, struct, sys, time

MAGIC = 0x5354
HELLO, HELLO_ACK, READY, PING, PONG, SHUTDOWN = 1, 2, 3, 4, 5, 6
EXEC, STDIN, STDIN_CLOSE, SIGNAL, WINDOW, RESIZE = 0x10, 0x11, 0x12, 0x13, 0x14, 0x15
FILE_WRITE, DATA, END, FILE_READ, STAT, LIST, MKDIR, REMOVE, CANCEL = range(0x20, 0x29)
RESULT, ERROR, STDOUT, STDERR, STARTED, EXIT = 0x30, 0x31, 0x40, 0x41, 0x42, 0x43
ARG, ENV, CWD, USER, TIMEOUT_MS, SHELL, PATH, OFFSET, LENGTH, MODE, FLAGS, SIGNUM, TIME_NS, ENTROPY, ROWS, COLS = range(1, 17)
CREDIT = 4 << 20


def tlv(tag, val):
    if isinstance(val, str):
        val = val.encode()
    return struct.pack('<BI', tag, len(val)) + val


def u32(tag, v): return tlv(tag, struct.pack('<I', v))
def u64(tag, v): return tlv(tag, struct.pack('<Q', v))


class GuestError(Exception):
    pass


class Agent:
    def __init__(self, path, timeout=30.0):
        deadline = time.time() + timeout
        while True:
            try:
                self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.s.connect(path)
                break
            except OSError:
                self.s.close()
                if time.time() > deadline:
                    raise
                time.sleep(0.05)
        self.buf = bytearray()
        self.next_id = 1
        self.credit = {}  # stream -> bytes of STDIN we may still send

    def send(self, typ, stream, payload=b''):
        self.s.sendall(struct.pack('<HBBII', MAGIC, typ, 0, stream, len(payload)) + payload)

    def recv(self, timeout=None):
        self.s.settimeout(timeout)
        while True:
            if len(self.buf) >= 12:
                magic, typ, _, sid, n = struct.unpack_from('<HBBII', self.buf)
                if magic != MAGIC or n > 1 << 20:
                    del self.buf[0]  # resync
                    continue
                if len(self.buf) >= 12 + n:
                    p = bytes(self.buf[12:12 + n])
                    del self.buf[:12 + n]
                    if typ == WINDOW and sid in self.credit and len(p) == 4:
                        self.credit[sid] += struct.unpack('<I', p)[0]
                    return typ, sid, p
            chunk = self.s.recv(1 << 20)
            if not chunk:
                raise EOFError('guest closed the connection')
            self.buf += chunk

    def hello(self, timeout=60.0):
        """Resyncs: retries HELLO with a fresh nonce until its HELLO_ACK arrives."""
        deadline = time.time() + timeout
        while True:
            nonce = os.urandom(16)
            self.send(HELLO, 0, nonce + u64(TIME_NS, time.time_ns()) + tlv(ENTROPY, os.urandom(64)))
            try:
                while True:
                    typ, sid, p = self.recv(timeout=0.5)
                    if typ == HELLO_ACK and p[:16] == nonce:
                        return json.loads(p[16:])
            except socket.timeout:
                if time.time() > deadline:
                    raise
    def new_id(self):
        i = self.next_id
        self.next_id += 1
        return i

    def ping(self, data=b'x'):
        self.send(PING, 0, data)
        while True:
            typ, sid, p = self.recv()
            if typ == PONG and p == data:
                return

    def ack(self, sid, n):
        if n:
            self.send(WINDOW, sid, struct.pack('<I', n))

    def exec(self, argv=None, shell=None, env=(), cwd=None, user=None, timeout_ms=None,
             stdin=None, out=None, err=None, signal_after=None):
        sid = self.new_id()
        p = b''.join(tlv(ARG, a) for a in (argv or []))
        if shell is not None: p += tlv(SHELL, shell)
        p += b''.join(tlv(ENV, e) for e in env)
        if cwd: p += tlv(CWD, cwd)
        if user: p += tlv(USER, user)
        if timeout_ms: p += u64(TIMEOUT_MS, timeout_ms)
        if stdin is not None: p += u32(FLAGS, 4)
        self.credit[sid] = CREDIT
        self.send(EXEC, sid, p)
        res = {'stdout': bytearray(), 'stderr': bytearray()}
        pending = memoryview(stdin) if stdin is not None else None
        sig_at = None
        while True:
            while pending is not None and self.credit[sid] > 0:
                n = min(len(pending), self.credit[sid], 65536)
                if n == 0:
                    self.send(STDIN_CLOSE, sid)
                    pending = None
                    break
                self.send(STDIN, sid, bytes(pending[:n]))
                self.credit[sid] -= n
                pending = pending[n:]
            wait = None
            if sig_at is not None:
                wait = max(0.0, sig_at - time.time())
            try:
                typ, s, d = self.recv(timeout=wait)
            except socket.timeout:
                self.send(SIGNAL, sid, u32(SIGNUM, signal_after[1]))
                sig_at = None
                continue
            if s != sid:
                continue
            if typ == STARTED:
                res['pid'] = json.loads(d)['pid']
                if signal_after:
                    sig_at = time.time() + signal_after[0] / 1000.0
            elif typ in (STDOUT, STDERR):
                key = 'stdout' if typ == STDOUT else 'stderr'
                sink = out if typ == STDOUT else err
                if sink: sink.write(d); sink.flush()
                else: res[key] += d
                self.ack(sid, len(d))
            elif typ == EXIT:
                res.update(json.loads(d))
                return res
            elif typ == ERROR:
                raise GuestError(json.loads(d))

    def _result(self, sid):
        while True:
            typ, s, d = self.recv()
            if s != sid: continue
            if typ == RESULT: return json.loads(d)
            if typ == ERROR: raise GuestError(json.loads(d))

    def write_file(self, remote, src, mode=None, append=False):
        sid = self.new_id()
        p = tlv(PATH, remote) + (u32(MODE, mode) if mode is not None else b'') + (u32(FLAGS, 1) if append else b'')
        self.send(FILE_WRITE, sid, p)
        while True:
            chunk = src.read(256 * 1024)
            if not chunk: break
            self.send(DATA, sid, chunk)
        self.send(END, sid)
        return self._result(sid)

    def read_file(self, remote, dst, offset=None, length=None):
        sid = self.new_id()
        p = tlv(PATH, remote) + (u64(OFFSET, offset) if offset is not None else b'') + (u64(LENGTH, length) if length is not None else b'')
        self.send(FILE_READ, sid, p)
        while True:
            typ, s, d = self.recv()
            if s != sid: continue
            if typ == DATA:
                dst.write(d); self.ack(sid, len(d))
            elif typ == END: return json.loads(d)
            elif typ == ERROR: raise GuestError(json.loads(d))

    def simple(self, typ, path, flags=0, mode=None):
        sid = self.new_id()
        p = tlv(PATH, path) + (u32(FLAGS, flags) if flags else b'') + (u32(MODE, mode) if mode is not None else b'')
        self.send(typ, sid, p)
        return self._result(sid)

    def list(self, path):
        sid = self.new_id()
        self.send(LIST, sid, tlv(PATH, path))
        data = bytearray()
        while True:
            typ, s, d = self.recv()
            if s != sid: continue
            if typ == DATA: data += d; self.ack(sid, len(d))
            elif typ == END: return [json.loads(l) for l in data.decode().splitlines() if l]
            elif typ == ERROR: raise GuestError(json.loads(d))


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--sock', required=True)
    ap.add_argument('--connect-timeout', type=float, default=30.0)
    ap.add_argument('cmd')
    ap.add_argument('args', nargs='*')
    ap.add_argument('--shell'); ap.add_argument('--env', action='append', default=[])
    ap.add_argument('--cwd'); ap.add_argument('--user'); ap.add_argument('--timeout-ms', type=int)
    ap.add_argument('--stdin-file'); ap.add_argument('--signal-after-ms', type=int)
    ap.add_argument('--signum', type=int, default=9); ap.add_argument('--mode', type=lambda s: int(s, 8))
    ap.add_argument('-p', action='store_true'); ap.add_argument('-r', action='store_true')
    ap.add_argument('--count', type=int, default=100)
    a = ap.parse_intermixed_args()
    ag = Agent(a.sock, a.connect_timeout)
    t0 = time.time()
    info = ag.hello()
    out = lambda o: print(json.dumps(o))
    try:
        if a.cmd == 'hello':
            info['hello_ms'] = round((time.time() - t0) * 1000, 1); out(info)
        elif a.cmd == 'ping':
            ts = []
            for i in range(a.count):
                t = time.perf_counter(); ag.ping(b'%d' % i); ts.append((time.perf_counter() - t) * 1000)
            out({'ping_ms_p50': round(pct(ts, .5), 3), 'ping_ms_p90': round(pct(ts, .9), 3)})
        elif a.cmd == 'bench':
            ts = []
            for i in range(a.count):
                t = time.perf_counter(); ag.exec(argv=['true']); ts.append((time.perf_counter() - t) * 1000)
            out({'exec_true_ms_p50': round(pct(ts, .5), 2), 'exec_true_ms_p90': round(pct(ts, .9), 2)})
        elif a.cmd == 'exec':
            stdin = open(a.stdin_file, 'rb').read() if a.stdin_file else None
            sig = (a.signal_after_ms, a.signum) if a.signal_after_ms is not None else None
            r = ag.exec(argv=a.args or None, shell=a.shell, env=a.env, cwd=a.cwd, user=a.user,
                        timeout_ms=a.timeout_ms, stdin=stdin, out=sys.stdout.buffer,
                        err=sys.stderr.buffer, signal_after=sig)
            r.pop('stdout'); r.pop('stderr')
            print(json.dumps(r), file=sys.stderr)
            sys.exit(r['exit_code'])
        elif a.cmd == 'write':
            with open(a.args[0], 'rb') as f: out(ag.write_file(a.args[1], f, a.mode))
        elif a.cmd == 'read':
            with open(a.args[1], 'wb') as f: out(ag.read_file(a.args[0], f))
        elif a.cmd == 'stat': out(ag.simple(STAT, a.args[0]))
        elif a.cmd == 'list':
            for e in ag.list(a.args[0]): out(e)
        elif a.cmd == 'mkdir': out(ag.simple(MKDIR, a.args[0], 2 if a.p else 0, a.mode))
        elif a.cmd == 'remove': out(ag.simple(REMOVE, a.args[0], 2 if a.r else 0))
        elif a.cmd == 'shutdown':
            ag.send(SHUTDOWN, 0)
            try:  # QEMU closes the socket when it exits
                while True: ag.recv(timeout=30)
            except (EOFError, OSError):
                pass
        else: ap.error('unknown command ' + a.cmd)
    except GuestError as e:
        print(json.dumps(e.args[0]), file=sys.stderr); sys.exit(2)


if __name__ == '__main__':
    main()
