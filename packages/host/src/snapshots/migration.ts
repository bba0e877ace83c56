import { existsSync, rmSync } from "node:fs";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { QmpClient } from "../vmm/qmp-client.js";

// Saving and loading VM state with QEMU's migration (7.2 has no `file:` URI: use `exec:`).

const quote = (p: string) => `'${p.replaceAll("'", "'\\''")}'`;

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

/** How long after QEMU reports a save `completed` its `cat` may take to write the rest and exit. */
const SAVE_SETTLE_MS = 30_000;

/**
 * Stops the VM and writes its state to `file`. With `ignoreShared` (RAM in a shared file) only
 * device state is written: milliseconds, kilobytes. Resolves only once `file` is complete: QEMU
 * reports the migration `completed` before it closes the pipe and waits for `cat`, which may
 * still be writing the tail then, so `cat` writes a temporary name and the shell renames it after
 * `cat` exited; a reader (a fork's child, the seal) never sees a file still being written.
 */
export async function saveVmState(
  qmp: QmpClient,
  file: string,
  opts: { ignoreShared: boolean; signal?: AbortSignal },
): Promise<void> {
  await setCapabilities(qmp, opts.ignoreShared);
  // The default 128 MiB/s throttles local saves (FACTS.md).
  await qmp.execute("migrate-set-parameters", { "max-bandwidth": 17179869184 });
  await qmp.execute("stop", undefined, { timeoutMs: 10_000 });
  const part = path.join(path.dirname(file), `.${path.basename(file)}.part`);
  rmSync(file, { force: true });
  const uri = `exec:cat > ${quote(part)} && exec mv -f ${quote(part)} ${quote(file)}`;
  await qmp.execute("migrate", { uri }, { timeoutMs: 10_000 });
  try {
    await waitMigration(qmp, opts.signal);
    for (const deadline = Date.now() + SAVE_SETTLE_MS; !existsSync(file); await sleep(2)) {
      opts.signal?.throwIfAborted();
      if (Date.now() > deadline) throw new Error(`the saved state was not written in full to ${file}`);
    }
  } catch (err) {
    // A save cut short (deadline, full disk) must not keep running behind our back.
    await qmp.execute("migrate_cancel", undefined, { timeoutMs: 5000 }).catch(() => {});
    rmSync(part, { force: true });
    throw err;
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
 * Loads state saved by saveVmState into a QEMU started with `-incoming defer`, then runs it.
 * `beforeRun` runs once the state is loaded, before the guest's CPUs go (a warm clone resizes its
 * disk there); with `run: false` the guest is left paused (a memory image is made so).
 */
export async function loadVmState(
  qmp: QmpClient,
  file: string,
  opts: { ignoreShared: boolean; signal?: AbortSignal; beforeRun?: () => Promise<void>; run?: boolean },
): Promise<void> {
  // Sent together: QMP runs a connection's commands in order, so the second waits for no round trip.
  await Promise.all([
    setCapabilities(qmp, opts.ignoreShared),
    qmp.execute("migrate-incoming", { uri: `exec:cat ${quote(file)}` }),
  ]);
  await waitMigration(qmp, opts.signal);
  await opts.beforeRun?.();
  // `run: false` leaves it paused (a state saved from a stopped VM loads paused).
  if (opts.run !== false) await qmp.execute("cont");
}
