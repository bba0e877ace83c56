# Probes run as root inside a hostile sandbox (network.test.ts): each prints one line.
#   tcp HOST PORT            OK connected | ERR refused | ERR timeout
#   udpflood HOST PORT N     N datagrams of 1 KiB: OK sent N (STALLED after I: ... when a send blocks 10 s)
#   synflood HOST PORT N     N connects left half-open: OK tried N
#   arpspoof IP N            N gratuitous ARP replies claiming IP with our MAC: OK sent N
#   dns NAME                 an A lookup at our resolver: OK ADDR | ERR ...
import os, socket, struct, sys, time

def out(s): print(s); sys.exit(0)

def tcp(host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect((host, int(port)))
        out("OK connected")
    except ConnectionRefusedError:
        out("ERR refused")
    except (socket.timeout, TimeoutError):
        out("ERR timeout")
    except OSError as e:
        out("ERR %s" % e.strerror)

def resolver():
    return open("/etc/resolv.conf").read().split("nameserver")[1].split()[0]

cmd, args = sys.argv[1], sys.argv[2:]
if cmd == "tcp":
    tcp(args[0], args[1])
elif cmd == "udpflood":
    host = resolver() if args[0] == "resolver" else args[0]
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    # A send that blocks 10 s (the guest's own queue to its NIC never drained) ends the flood:
    # what was sent, and the NIC's counters, are the answer.
    s.settimeout(10)
    n = int(args[2])
    for i in range(n):
        try:
            s.sendto(os.urandom(1024), (host, int(args[1]) if args[1] != "any" else 1024 + i % 60000))
        except (socket.timeout, TimeoutError):
            dev = [l.split() for l in open("/proc/net/dev") if "eth0" in l]
            out("STALLED after %d: eth0 %s" % (i, " ".join(dev[0]) if dev else "?"))
        except OSError:
            pass
    out("OK sent %d" % n)
elif cmd == "synflood":
    socks = []
    n = int(args[2])
    for i in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect((args[0], int(args[1])))
        except OSError:
            pass
        socks.append(s)
    time.sleep(1)
    out("OK tried %d" % n)
elif cmd == "arpspoof":
    ip, n = args[0], int(args[1])
    mac = bytes.fromhex(open("/sys/class/net/eth0/address").read().strip().replace(":", ""))
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind(("eth0", 0))
    tip = socket.inet_aton(ip)
    arp = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 2, mac, tip, b"\xff" * 6, tip)
    for _ in range(n):
        s.send(b"\xff" * 6 + mac + b"\x08\x06" + arp)
        time.sleep(0.01)
    out("OK sent %d" % n)
elif cmd == "dns":
    q = struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
    for label in args[0].split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\x00" + struct.pack("!HH", 1, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(3)
    for _ in range(3):
        try:
            s.sendto(q, (resolver(), 53))
            r = s.recv(2048)
            if r[3] & 0xF:
                out("ERR rcode%d" % (r[3] & 0xF))
            if r[-4:] and struct.unpack("!H", r[6:8])[0] > 0:
                out("OK " + socket.inet_ntoa(r[-4:]))
            out("ERR empty")
        except (socket.timeout, TimeoutError):
            continue
    out("ERR timeout")
else:
    out("ERR unknown command")
