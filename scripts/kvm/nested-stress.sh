#!/usr/bin/env bash
# Stress for KVM inside a TCG guest (docs/architecture.md, "How the KVM path is tested"): an L1
# guest whose CPU emulates AMD SVM (-accel tcg, SMP vCPUs) boots ROUNDS rounds of PAR KVM guests
# at once (L2, 2 vCPUs each, writing 60 MiB and reading /proc), and says whether L1 lived to the
# end ("L1-DONE"), or its console's tail. Needs what scripts/setup.sh caches (kernel, modules),
# busybox-static and qemu-system-x86. Usage: [SMP=1|2] [ACCEL_EXTRA=,thread=single] nested-stress.sh ROUNDS PAR
# Measured 2026-12-06 (2-core build machine): SMP=2, 8 x 4: 3 of 3 runs lost L1; SMP=1: 0 of 2.
set -euo pipefail
ROUNDS=${1:-4}; PAR=${2:-3}; EXTRA=${ACCEL_EXTRA:-}; SMP=${SMP:-2}
cache=${SANDTREE_CACHE_DIR:-$HOME/.cache/sandtree}
kernel=$cache/kernel/vmlinuz
mods=$cache/kernel/modules/$(cat "$cache/kernel/release")/kernel
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
bb=$(command -v busybox || echo /bin/busybox)
q=$(command -v qemu-system-x86_64)
mkdir -p "$work"/l1/{bin,dev,proc,sys,mods,usr/share,tmp} "$work"/l2/{bin,proc,dev}
cp "$bb" "$work/l1/bin/busybox"; cp "$bb" "$work/l2/bin/busybox"
cp "$mods/virt/lib/irqbypass.ko" "$mods/arch/x86/kvm/kvm.ko" "$mods/arch/x86/kvm/kvm-amd.ko" "$work/l1/mods/"
mkdir -p "$work/l1$(dirname "$q")"; cp "$q" "$work/l1$q"
for lib in $(ldd "$q" | grep -o '/[^ ]*'); do mkdir -p "$work/l1$(dirname "$lib")"; cp -L "$lib" "$work/l1$lib"; done
cp -rL /usr/share/qemu "$work/l1/usr/share/"; cp -rL /usr/share/seabios "$work/l1/usr/share/" 2>/dev/null || true
cp "$kernel" "$work/l1/vmlinuz"
cat > "$work/l2/init" <<'L2'
#!/bin/busybox sh
/bin/busybox mount -t proc p /proc
/bin/busybox mount -t devtmpfs d /dev
i=0; while [ $i -lt 3 ]; do /bin/busybox dd if=/dev/urandom of=/dev/null bs=64k count=200 2>/dev/null; /bin/busybox dd if=/dev/zero of=/f bs=1M count=60 2>/dev/null; /bin/busybox rm -f /f; /bin/busybox ls -R /proc >/dev/null 2>&1; i=$((i+1)); done
echo L2-OK $(/bin/busybox cat /proc/uptime)
/bin/busybox poweroff -f
L2
chmod +x "$work/l2/init"; (cd "$work/l2" && find . | cpio -o -H newc 2>/dev/null | gzip > ../l1/l2.gz)
cat > "$work/l1/init" <<L1
#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc; /bin/busybox mount -t sysfs sys /sys; /bin/busybox mount -t devtmpfs dev /dev
for m in irqbypass kvm kvm-amd; do /bin/busybox insmod /mods/\$m.ko || echo "insmod \$m failed"; done
r=0
while [ \$r -lt $ROUNDS ]; do
  j=0
  while [ \$j -lt $PAR ]; do
    $q -M microvm -accel kvm -cpu host -m 192 -smp ${L2SMP:-2} -nodefaults -no-user-config -display none -serial stdio -kernel /vmlinuz -initrd /l2.gz -append "console=ttyS0 panic=-1 quiet" > /tmp/l2-\$j.log 2>&1 &
    j=\$((j+1))
  done
  wait
  echo L1-ROUND \$r ok=\$(/bin/busybox cat /tmp/l2-*.log | /bin/busybox grep -c L2-OK) uptime \$(/bin/busybox cat /proc/uptime)
  r=\$((r+1))
done
echo L1-DONE uptime \$(/bin/busybox cat /proc/uptime)
/bin/busybox poweroff -f
L1
chmod +x "$work/l1/init"; (cd "$work/l1" && find . | cpio -o -H newc 2>/dev/null | gzip -1 > ../l1.gz)
khz=$(awk -F: '/^cpu MHz/{printf "%d", $2*1000; exit}' /proc/cpuinfo)
start=$(date +%s); rc=0
timeout 1200 "$q" -M microvm -accel tcg$EXTRA -cpu qemu64,+arat,+svm,+npt -smp $SMP -m 2048 -nodefaults -no-user-config -no-reboot \
  -display none -serial stdio -kernel "$kernel" -initrd "$work/l1.gz" \
  -append "console=ttyS0 panic=-1 reboot=t nowatchdog loglevel=4 tsc_early_khz=$khz lpj=$((khz*4)) tsc=reliable" > "$work/out.log" 2>&1 || rc=$?
grep -aE 'L1-|panic|Oops|BUG|stall|insmod' "$work/out.log" | tail -30 || true
echo "qemu rc=$rc wall=$(( $(date +%s) - start ))s extra='$EXTRA' smp=$SMP"
grep -q L1-DONE "$work/out.log" || { echo "--- L1 did not finish; console tail:"; tail -c 1500 "$work/out.log"; }
