// Throughput floor of the bare virtio-serial port: the same bare QEMU as raw-floor.py (its
// kernel and busybox initramfs, a busybox shell on the port, no sandtree code), measured in the
// same run. raw-floor.py has no throughput figures, so they are taken here:
//   out_large:  `dd if=/dev/zero bs=65536` written straight to the port (large writes)
//   out_small:  `yes ... | head -c N` written straight to the port (the same small-write program)
//   in:         the host writes N bytes into `head -c N >/dev/null` reading the port
// Call after measureFloor(), which builds the kernel and initramfs in $RAW_WORK.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";

const MiB = 1024 * 1024;

function khz() {
  const line = readFileSync("/proc/cpuinfo", "utf8")
    .split("\n")
    .find((l) => l.startsWith("cpu MHz"));
  return line ? Math.round(Number(line.split(":")[1]) * 1000) : 0;
}

async function connect(sockPath) {
  for (let i = 0; i < 500; i++) {
    const s = await new Promise((resolve) => {
      const c = net.connect(sockPath);
      c.once("connect", () => resolve(c));
      c.once("error", () => resolve(null));
    });
    if (s) return s;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`no socket ${sockPath}`);
}

/** Resolves with the bytes received until `marker` ends the stream seen so far. */
function until(sock, marker, onBytes) {
  const m = Buffer.from(marker);
  return new Promise((resolve) => {
    let tail = Buffer.alloc(0);
    let total = 0;
    const onData = (d) => {
      total += d.length;
      onBytes?.(d.length);
      tail = Buffer.concat([tail, d]).subarray(-64);
      if (tail.includes(m)) {
        sock.off("data", onData);
        resolve(total);
      }
    };
    sock.on("data", onData);
  });
}

/** Runs the serial-port throughput floor; `{ error }` when the floor's kernel is not there. */
export async function measureSerialFloor(accel, opts = {}) {
  const mib = opts.mib ?? 64;
  const n = mib * MiB;
  const rawWork = process.env.RAW_WORK ?? path.join(tmpdir(), "raw-baseline");
  const boot = path.join(rawWork, "x", "boot");
  const initrd = path.join(rawWork, "initrd.gz");
  const kernel = existsSync(boot) ? readdirSync(boot).find((f) => f.startsWith("vmlinuz-")) : undefined;
  if (!kernel || !existsSync(initrd)) return { error: `the floor's kernel/initramfs is not in ${rawWork}` };
  const dir = mkdtempSync(path.join(tmpdir(), "serial-floor-"));
  const sockPath = path.join(dir, "agent.sock");
  const k = khz();
  const qemu = spawn(
    "qemu-system-x86_64",
    [
      ...["-M", "microvm", "-accel", accel, "-m", "256", "-smp", "1", "-nodefaults", "-no-user-config"],
      ...["-display", "none", "-serial", "none", "-kernel", path.join(boot, kernel), "-initrd", initrd],
      ...["-append", `console=ttyS0 quiet panic=-1 tsc_early_khz=${k} lpj=${k * 4}`],
      ...["-device", "virtio-serial-device", "-chardev", `socket,id=ag,path=${sockPath},server=on,wait=off`],
      ...["-device", "virtserialport,chardev=ag,name=agent"],
    ],
    { stdio: "ignore" },
  );
  try {
    const sock = await connect(sockPath);
    const up = until(sock, "UP\n");
    const poke = setInterval(() => sock.write("echo UP\n"), 300);
    sock.write("echo UP\n");
    await up;
    clearInterval(poke);
    await new Promise((r) => setTimeout(r, 300)); // let answers to the extra pokes arrive
    sock.removeAllListeners("data");
    const timeOut = async (cmd) => {
      const t0 = performance.now();
      const done = until(sock, "XEND\n");
      sock.write(`${cmd}; echo XEND\n`);
      const bytes = await done;
      const s = (performance.now() - t0) / 1000;
      return +((bytes - 5) / MiB / s).toFixed(1);
    };
    const out = {
      source: "bare QEMU virtio-serial port, busybox shell (raw-floor.py's kernel and initramfs), same run",
      mib,
      out_large_mb_s: await timeOut(`dd if=/dev/zero bs=65536 count=${n / 65536} 2>/dev/null`),
      out_small_mb_s: await timeOut(`yes abcdefghijklmnopqrstuvwxyz | head -c ${n}`),
    };
    // Host -> guest: `GO` tells that head is about to read, so the shell has not buffered data.
    const go = until(sock, "GO\n");
    sock.write(`echo GO; head -c ${n} >/dev/null; echo XEND\n`);
    await go;
    const t0 = performance.now();
    const done = until(sock, "XEND\n");
    const block = Buffer.alloc(MiB, 0x61);
    for (let i = 0; i < mib; i++) if (!sock.write(block)) await new Promise((r) => sock.once("drain", r));
    await done;
    out.in_mb_s = +(mib / ((performance.now() - t0) / 1000)).toFixed(1);
    sock.destroy();
    return out;
  } catch (err) {
    return { error: err.message };
  } finally {
    qemu.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  }
}
