import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, closeSync, existsSync, openSync, renameSync, rmSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { QmpClient } from "../vmm/qmp-client.js";

// Saving and loading VM state with QEMU's migration. 7.2 has no `file:` URI, and a jailed QEMU
// may not spawn (its seccomp filter denies it: no `exec:`), so a save streams to a Unix socket
// the host listens on and writes to the file, and a load reads a file descriptor QEMU was
// started with (`fd:N`).

async function waitMigration(qmp: QmpClient, signal?: AbortSignal): Promise<void> {
  for (;;) {
    signal?.throwIfAborted();
    const st = await qmp.execute<{ status?: string; "error-desc"?: string }>("query-migrate", undefined, { timeoutMs: 10_000 });
    if (st.status === "completed") return;
    if (st.status === "failed" || st.status === "cancelled") {
      throw new Error(`migration ${st.status}${st["error-desc"] ? `: ${st["error-desc"]}` : ""}`);
    }
    await sleep(5);
  }
}

async function setCapabilities(qmp: QmpClient, ignoreShared: boolean): Promise<void> {
  await qmp.execute("migrate-set-capabilities", {
    capabilities: [{ capability: "x-ignore-shared", state: ignoreShared }],
  });
}

/** How long after QEMU reports a save `completed` the host may take to write the rest. */
const SAVE_SETTLE_MS = 30_000;

/**
 * A one-connection Unix socket in `dir` (the VM's run directory, which only its uid and root
 * reach) whose stream is written to `part` and renamed to `file` once QEMU closed it. The
 * connection is handed, unread, to a `cat` (this process's, outside the jail) as its stdin: the
 * copy runs beside this process's event loop, as `exec:cat` did before the jail (read through
 * the loop, 64 KiB a turn, a save took about twice as long on a busy server).
 */
function receiveInto(dir: string, part: string, file: string): { socket: string; server: Server; done: Promise<void> } {
  const socket = path.join(dir, `mig-${randomBytes(4).toString("hex")}.sock`);
  rmSync(socket, { force: true });
  let resolveDone!: () => void;
  let rejectDone!: (err: Error) => void;
  const done = new Promise<void>((res, rej) => {
    resolveDone = res;
    rejectDone = rej;
  });
  done.catch(() => {});
  const server = createServer({ pauseOnConnect: true }, (conn: Socket) => {
    server.close();
    let out: number;
    try {
      out = openSync(part, "w", 0o600);
    } catch (err) {
      conn.destroy();
      return rejectDone(err as Error);
    }
    let cat: ChildProcess;
    try {
      cat = spawn("cat", [], { stdio: [conn, out, "pipe"] });
    } catch (err) {
      conn.destroy();
      return rejectDone(err as Error);
    } finally {
      closeSync(out);
    }
    // The child has its own copy of the connection: this side's is closed (the stream's end is
    // then cat's alone to see).
    conn.destroy();
    let stderr = "";
    cat.stderr?.on("data", (d: Buffer) => {
      stderr += d.toString().slice(0, 1000);
    });
    cat.once("error", rejectDone);
    cat.once("close", (code, signal) => {
      if (code !== 0) return rejectDone(new Error(`cat exited ${code ?? signal}: ${stderr.trim()}`));
      try {
        renameSync(part, file);
        resolveDone();
      } catch (err) {
        rejectDone(err as Error);
      }
    });
  });
  server.listen(socket);
  return { socket, server, done };
}

/**
 * Stops the VM and writes its state to `file`. With `ignoreShared` (RAM in a shared file) only
 * device state is written: milliseconds, kilobytes. QEMU streams to a socket in `socketDir` (the
 * VM's run directory); the host writes a temporary name and renames it once the stream ended, so
 * a reader (a fork's child, the seal) never sees a file still being written. Resolves only then.
 */
export async function saveVmState(
  qmp: QmpClient,
  file: string,
  opts: { ignoreShared: boolean; socketDir: string; signal?: AbortSignal },
): Promise<void> {
  await setCapabilities(qmp, opts.ignoreShared);
  // The default 128 MiB/s throttles local saves (FACTS.md).
  await qmp.execute("migrate-set-parameters", { "max-bandwidth": 17179869184 });
  await qmp.execute("stop", undefined, { timeoutMs: 10_000 });
  const part = path.join(path.dirname(file), `.${path.basename(file)}.part`);
  rmSync(file, { force: true });
  const rx = receiveInto(opts.socketDir, part, file);
  // Removed when the save ends: a long-lived signal (a template store's) would gather one per save.
  let onAbort: (() => void) | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      rx.server.once("listening", resolve);
      rx.server.once("error", reject);
    });
    // The run directory is the VM's alone: its QEMU (another uid) may connect.
    chmodSync(rx.socket, 0o666);
    await qmp.execute("migrate", { uri: `unix:${rx.socket}` }, { timeoutMs: 10_000 });
    await waitMigration(qmp, opts.signal);
    const settle = sleep(SAVE_SETTLE_MS, undefined, { ref: false }).then(() => {
      throw new Error(`the saved state was not written in full to ${file}`);
    });
    const aborted = new Promise<never>((_, reject) => {
      if (opts.signal?.aborted) reject(opts.signal.reason);
      onAbort = () => reject(opts.signal?.reason);
      opts.signal?.addEventListener("abort", onAbort, { once: true });
    });
    aborted.catch(() => {});
    await Promise.race([rx.done, settle, aborted]);
    if (!existsSync(file)) throw new Error(`the saved state was not written to ${file}`);
  } catch (err) {
    // A save cut short (deadline, full disk) must not keep running behind our back.
    await qmp.execute("migrate_cancel", undefined, { timeoutMs: 5000 }).catch(() => {});
    rmSync(part, { force: true });
    throw err;
  } finally {
    if (onAbort) opts.signal?.removeEventListener("abort", onAbort);
    rx.server.close();
    rmSync(rx.socket, { force: true });
  }
}

/**
 * Runs a VM again after saveVmState. QEMU reports the migration `completed` slightly before it
 * moves the VM to `postmigrate`; a `cont` in between is undone by that move, leaving the VM
 * paused (and refusing the next migration). So wait for the settled state, continue, and check.
 */
export async function resumeAfterSave(qmp: QmpClient, opts: { signal?: AbortSignal } = {}): Promise<void> {
  for (let i = 0; i < 400; i++) {
    opts.signal?.throwIfAborted();
    const { status } = await qmp.execute<{ status: string }>("query-status", undefined, { timeoutMs: 10_000 });
    if (status === "running") return;
    if (status === "postmigrate" || status === "paused") await qmp.execute("cont", undefined, { timeoutMs: 10_000 });
    await sleep(5);
  }
  throw new Error("the VM did not run again after saving its state");
}

/**
 * Loads state saved by saveVmState into a QEMU started with `-incoming defer` and the state file
 * open as its descriptor `fd` (see INCOMING_FD), then runs it. `beforeRun` runs once the state is
 * loaded, before the guest's CPUs go (a warm clone resizes its disk there); with `run: false`
 * the guest is left paused (a memory image is made so).
 */
export async function loadVmState(
  qmp: QmpClient,
  fd: number,
  opts: { ignoreShared: boolean; signal?: AbortSignal; beforeRun?: () => Promise<void>; run?: boolean },
): Promise<void> {
  // Sent together: QMP runs a connection's commands in order, so the second waits for no round trip.
  await Promise.all([setCapabilities(qmp, opts.ignoreShared), qmp.execute("migrate-incoming", { uri: `fd:${fd}` })]);
  await waitMigration(qmp, opts.signal);
  await opts.beforeRun?.();
  // `run: false` leaves it paused (a state saved from a stopped VM loads paused).
  if (opts.run !== false) await qmp.execute("cont");
}
