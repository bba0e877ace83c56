#!/usr/bin/env bash
# End-to-end test of the guest agent: builds a busybox rootfs disk, boots it under QEMU
# (microvm, TCG unless SANDTREE_ACCEL says otherwise) and drives it with agentctl.py.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
"$repo/scripts/build-guest.sh"
cache="${SANDTREE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sandtree}"
kernel="$cache/kernel/vmlinuz"; initrd="$cache/guest/initramfs.cpio.gz"
release="$(cat "$cache/kernel/release")"
work="$(mktemp -d /tmp/sandtree-boot-test.XXXXXX)"
qpid=""
cleanup() { [ -n "$qpid" ] && kill "$qpid" 2>/dev/null && wait "$qpid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
ctl() { python3 -B "$here/../tools/agentctl.py" --sock "$work/agent.sock" "$@"; }
fails=0
check() { # NAME EXPECTED ACTUAL
  if [ "$2" = "$3" ]; then echo "ok   $1"; else echo "FAIL $1: expected [$2] got [$3]"; fails=$((fails + 1)); fi
}

# A tiny root: static busybox with its applet links, users root and sandy.
r="$work/rootfs"
mkdir -p "$r"/{bin,sbin,usr/bin,usr/sbin,etc,tmp,root,home/sandy}
cp /bin/busybox "$r/bin/busybox"
for a in $("$r/bin/busybox" --list-full); do [ -e "$r/$a" ] || ln -s /bin/busybox "$r/$a"; done
printf 'root:x:0:0:root:/root:/bin/sh\nsandy:x:1000:1000::/home/sandy:/bin/sh\n' > "$r/etc/passwd"
printf 'root:x:0:\nsandy:x:1000:\nwheel:x:10:sandy\n' > "$r/etc/group"
chmod 1777 "$r/tmp"; chown 1000:1000 "$r/home/sandy"
mke2fs -q -t ext4 -d "$r" "$work/root.img" 64M
qemu-img convert -O qcow2 "$work/root.img" "$work/base.qcow2"
qemu-img create -q -f qcow2 -b "$work/base.qcow2" -F qcow2 "$work/overlay.qcow2" 512M

khz=$(awk '/cpu MHz/ {printf "%d", $4 * 1000; exit}' /proc/cpuinfo)
t0=$(date +%s%N)
qemu-system-x86_64 -M microvm -accel "${SANDTREE_ACCEL:-tcg}" -m 256 -smp 1 -nodefaults \
  -no-user-config -nographic -no-reboot -kernel "$kernel" -initrd "$initrd" \
  -append "console=ttyS0 quiet panic=-1 tsc_early_khz=$khz lpj=$((khz * 4))" \
  -serial "file:$work/console.log" \
  -drive id=root,file="$work/overlay.qcow2",format=qcow2,if=none -device virtio-blk-device,drive=root \
  -device virtio-serial-device -chardev socket,id=agent,path="$work/agent.sock",server=on,wait=off \
  -device virtserialport,chardev=agent,name=agent &
qpid=$!
hello="$(ctl hello)"
echo "hello after $(( ($(date +%s%N) - t0) / 1000000 )) ms wall: $hello"

check "uname -r" "$release" "$(ctl exec -- uname -r 2>/dev/null)"
check "hostname" "sandbox" "$(ctl exec -- hostname 2>/dev/null)"
check "PID 1 is the agent" "$(sha256sum < "$cache/guest/sandtree-agent" | cut -c1-64)" \
  "$(ctl exec --shell 'sha256sum /proc/1/exe' 2>/dev/null | cut -c1-64)"
set +e
ctl exec -- true 2>/dev/null; check "exit 0" 0 $?
ctl exec -- false 2>/dev/null; check "exit 1" 1 $?
ctl exec --signal-after-ms 500 --signum 9 -- sleep 30 2>/dev/null; check "SIGNAL 9 -> 137" 137 $?
ctl exec --timeout-ms 500 -- sleep 30 2>"$work/to.err"; check "timeout -> 124" 124 $?
check "timed_out flag" 1 "$(grep -c '"timed_out": true' "$work/to.err")"
ctl exec -- /no/such/program 2>/dev/null; check "missing program -> 127" 127 $?
ctl exec -- nosuchprogram 2>/dev/null; check "missing program on PATH -> 127" 127 $?
ctl exec -- /etc/passwd 2>/dev/null; check "not executable -> 126" 126 $?
ctl exec --shell 'echo out; echo err >&2; exit 3' >"$work/o" 2>"$work/e"; check "exit 3" 3 $?
set -e
check "stdout" "out" "$(cat "$work/o")"
check "stderr" "err" "$(head -1 "$work/e")"
check "user by name" "1000 1000 1000 10" "$(ctl exec --user sandy --shell 'echo $(id -u) $(id -g) $(id -G)' 2>/dev/null)"
check "user home/env" "/home/sandy sandy bar" "$(ctl exec --user sandy --env FOO=bar --shell 'echo $HOME $USER $FOO' 2>/dev/null)"
check "cwd" "/tmp" "$(ctl exec --cwd /tmp -- pwd 2>/dev/null)"
ctl exec --shell 'mkdir -p /tmp/bin && echo "echo no-shebang \$1" > /tmp/bin/s && chmod 755 /tmp/bin/s' 2>/dev/null
check "script without #! (absolute)" "no-shebang a" "$(ctl exec -- /tmp/bin/s a 2>/dev/null)"
check "PATH from the request's env" "no-shebang b" "$(ctl exec --env PATH=/nowhere:/tmp/bin -- s b 2>/dev/null)"
# PATH entries without the file are skipped before execve; a non-executable one is passed over
# (as execvp does) and reported as 126 only when nothing later on PATH runs.
ctl exec --shell 'mkdir -p /tmp/noexec && echo "echo wrong" > /tmp/noexec/s && chmod 644 /tmp/noexec/s' 2>/dev/null
check "PATH passes over a non-executable file" "no-shebang c" \
  "$(ctl exec --env PATH=/tmp/noexec:/nowhere/x:/etc/passwd/x:/tmp/bin -- s c 2>/dev/null)"
set +e
ctl exec --env PATH=/nowhere:/tmp/noexec -- s 2>/dev/null; check "only non-executable on PATH -> 126" 126 $?
set -e
# Output written in small pieces arrives whole and in order (coalesced into large frames).
check "10 MB of small writes" "$(yes abcdefghijklmnopqrstuvwxyz | head -c 10000000 | sha256sum)" \
  "$(ctl exec --shell 'yes abcdefghijklmnopqrstuvwxyz | head -c 10000000' 2>/dev/null | sha256sum)"
check "stdout and stderr interleaved small writes" "20000 20000" \
  "$(ctl exec --shell 'i=0; while [ $i -lt 20000 ]; do echo o; echo e >&2; i=$((i+1)); done' 2>"$work/e2" | grep -c '^o$') $(grep -c '^e$' "$work/e2")"
check "background child does not delay EXIT" "done" \
  "$(timeout 20 python3 -B "$here/../tools/agentctl.py" --sock "$work/agent.sock" exec --shell 'sleep 60 & echo done' 2>/dev/null)"
head -c 3000000 /dev/urandom > "$work/stdin.bin"
check "stdin 3 MB" "3000000" "$(ctl exec --stdin-file "$work/stdin.bin" -- wc -c 2>/dev/null | tr -d ' ')"
check "loopback up" "0" "$(ctl exec --shell 'ping -c1 -W2 127.0.0.1 >/dev/null; echo $?' 2>/dev/null)"

# The ext4 filesystem grew to the 512 MiB overlay.
blocks=$(ctl exec --shell 'stat -f -c "%b %S" /' 2>/dev/null)
size_mb=$(( $(echo "$blocks" | awk '{print $1 * $2}') / 1048576 ))
check "fs grew to ~512 MiB (minus ext4 overhead)" "yes" "$([ "$size_mb" -ge 400 ] && echo yes || echo "no ($size_mb MiB)")"

# 100 MiB round trip.
head -c $((100 * 1048576)) /dev/urandom > "$work/big"
t=$(date +%s%N); ctl write "$work/big" /tmp/big >/dev/null; tw=$(( ($(date +%s%N) - t) / 1000000 ))
t=$(date +%s%N); ctl read /tmp/big "$work/big.back" >/dev/null; tr_=$(( ($(date +%s%N) - t) / 1000000 ))
echo "     100 MiB write ${tw} ms, read ${tr_} ms"
check "100 MiB sha256 round trip" "$(sha256sum < "$work/big")" "$(sha256sum < "$work/big.back")"
check "100 MiB sha256 in guest" "$(sha256sum < "$work/big" | cut -c1-64)" \
  "$(ctl exec --shell 'sha256sum /tmp/big' 2>/dev/null | cut -c1-64)"
ctl remove /tmp/big >/dev/null

ctl mkdir -p /tmp/a/b/c >/dev/null
printf 'hello' > "$work/small"; ctl write "$work/small" /tmp/a/b/c/f.txt --mode 600 >/dev/null
check "stat" '"file" 5 384' "$(ctl stat /tmp/a/b/c/f.txt | python3 -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps(d["type"]), d["size"], d["mode"])')"
ctl exec -- ln -s /etc /tmp/a/link 2>/dev/null
check "list" "b:dir link:symlink:/etc" "$(ctl list /tmp/a | python3 -c 'import json,sys; print(" ".join(sorted(":".join(filter(None,[d["name"],d["type"],d.get("target")])) for d in map(json.loads, sys.stdin))))')"
check "read range" "ell" "$(python3 -B -c '
import sys,io; sys.path.insert(0, sys.argv[1]); import agentctl as a
g=a.Agent(sys.argv[2]); g.hello(); b=io.BytesIO(); g.read_file("/tmp/a/b/c/f.txt", b, 1, 3); print(b.getvalue().decode())' "$here/../tools" "$work/agent.sock")"
set +e
ctl mkdir /tmp/a 2>/dev/null; check "mkdir existing -> error" 2 $?
ctl remove /tmp/a 2>/dev/null; check "remove non-empty w/o -r -> error" 2 $?
ctl remove -r /tmp/a >/dev/null; check "remove -r" 0 $?
ctl stat /etc/passwd >/dev/null; check "stat existing" 0 $?
ctl stat /tmp/a 2>/dev/null; check "removed" 2 $?
set -e

ctl ping --count 200
ctl bench --count 30

# SHUTDOWN powers the VM off: QEMU must exit by itself.
ctl shutdown
for _ in $(seq 100); do kill -0 "$qpid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$qpid" 2>/dev/null; then check "shutdown exits QEMU" yes no; else wait "$qpid" || true; qpid=""; check "shutdown exits QEMU" yes yes; fi

[ "$fails" = 0 ] || { echo "--- console"; cat "$work/console.log"; echo "$fails check(s) failed"; exit 1; }
echo "all checks passed"
