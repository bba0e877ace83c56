import type { Machine, MachineExecEvent } from "@sandtree/host";
import { SandtreeError } from "@sandtree/protocol";
import { HeadBuffer } from "../commands/output-spill.js";

/** How long x11vnc may take to send its RFB banner (it may first bring the display up, under TCG). */
const BANNER_DEADLINE_MS = 120_000;

/** One VNC client's connection to the display: raw RFB bytes both ways. */
export interface VncStream {
  /** What x11vnc sends (the RFB ProtocolVersion banner first); ends when it exits. */
  output: AsyncIterable<Buffer>;
  /** What the client sends; resolves once the guest granted credit for it. */
  write(data: Buffer): Promise<void>;
  /** Ends x11vnc and its relay (idempotent). */
  close(): void;
}

/**
 * Starts `sandtree-desktop vnc-stdio` in the guest over the agent: one x11vnc per client
 * (`-inetd`, view only unless `interactive`), its RFB bytes on the exec's stdin and stdout. No
 * guest network is involved, so it works for sandboxes created with `network: false`. Resolves
 * once the banner arrived, so a guest that cannot serve VNC fails before the caller upgrades.
 */
export async function openVncStream(vm: Machine, helper: string, interactive: boolean, id: string): Promise<VncStream> {
  const exec = vm.exec({ argv: [helper, "vnc-stdio", ...(interactive ? ["--writable"] : [])], env: {}, stdin: true });
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    try {
      exec.signal(9);
    } catch {} // it already ended
  };
  // Only its last 500 characters are shown; a flood before the first stdout is kept to 64 KiB.
  const stderr = new HeadBuffer(64 * 1024);
  const deadline = setTimeout(close, BANNER_DEADLINE_MS);
  let first: Buffer | null = null;
  let exitCode: number | null = null;
  try {
    for (;;) {
      const r: IteratorResult<MachineExecEvent> = await exec.events.next();
      if (r.done) break;
      const ev = r.value;
      if (ev.type === "stdout") {
        first = ev.data;
        break;
      }
      if (ev.type === "stderr") stderr.push(ev.data);
      if (ev.type === "exit") {
        exitCode = ev.info.exit_code;
        break;
      }
    }
  } catch (err) {
    close();
    throw new SandtreeError("GUEST_ERROR", `cannot start VNC in sandbox ${id}: ${(err as Error).message}`);
  } finally {
    clearTimeout(deadline);
  }
  if (first === null) {
    close();
    if (exitCode === 3 || exitCode === 127) {
      throw new SandtreeError("NO_DISPLAY", `sandbox ${id} has no display: create it with display: {width, height}`, { id });
    }
    const why = stderr.take().trim().slice(-500);
    throw new SandtreeError("GUEST_ERROR", `VNC did not start in sandbox ${id} (exit ${exitCode ?? "none"}): ${why}`);
  }
  const banner = first;
  return {
    output: {
      async *[Symbol.asyncIterator]() {
        yield banner;
        for await (const ev of exec.events) if (ev.type === "stdout") yield ev.data;
      },
    },
    write: (data) => exec.writeStdin(data),
    close,
  };
}
