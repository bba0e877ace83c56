import { AgentClient } from "../agent/agent-client.js";
import { loadVmState } from "../snapshots/migration.js";
import { watchGuestTimer } from "./guest-timer.js";
import { ROOT_NODE } from "./qemu-args.js";
import { INCOMING_FD } from "./qemu-launch.js";
import { QmpClient } from "./qmp-client.js";

export interface GuestConnection {
  qmpSocket: string;
  agentSocket: string;
  /** Sent with the agent's handshake: eth0's setting, a clone's root disk size. */
  agentOpts: { net?: string; rootBytes?: number };
  /** A root-waiting template's clone: its disk's size, which the guest must mount. */
  rootBytes: number | null;
  signal: AbortSignal;
  /** The start's one deadline, for the agent's connect too. */
  timeoutMs: number;
  /** The VM was started to load a saved state (`-incoming`), not to boot. */
  restored: boolean;
  /** The saved state leaves guest RAM in the shared memory file (a template clone). */
  ignoreShared: boolean;
  /** A cold boot under TCG: watch for a guest that lost its timer while it boots (guest-timer.ts). */
  watchTimer?: boolean;
  /** Called as each step ends (`qmp`, `loaded`, `agent`): where a start's time went. */
  mark?: (step: "qmp" | "loaded" | "agent") => void;
}

/**
 * Connects QMP and the guest agent of a VM just launched. A booting guest: both at once. A
 * restored guest's port is closed until its state is loaded (bytes sent earlier are dropped):
 * its state is loaded and run first, then the agent shakes hands.
 */
export async function connectGuest(c: GuestConnection): Promise<readonly [QmpClient, AgentClient]> {
  const { qmpSocket, agentSocket, agentOpts, rootBytes, signal, timeoutMs } = c;
  const mark = c.mark ?? (() => {});
  if (!c.restored) {
    const agentConnect = AgentClient.connect(agentSocket, { signal, timeoutMs, ...agentOpts }).then((a) => {
      mark("agent");
      return a;
    });
    // Handled here whatever happens to QMP: a failed start kills QEMU, which ends this connect too.
    agentConnect.catch(() => {});
    const qmp = await QmpClient.connect(qmpSocket, { signal });
    mark("qmp");
    const watch = c.watchTimer ? watchGuestTimer(qmp, { signal }) : null;
    try {
      return [qmp, await (watch ? Promise.race([agentConnect, watch.lost]) : agentConnect)] as const;
    } catch (err) {
      qmp.close();
      throw err;
    } finally {
      watch?.stop();
    }
  }
  const qmp = await QmpClient.connect(qmpSocket, { signal });
  mark("qmp");
  // A template clone gets its RAM from the shared file; a memory checkpoint carries it all.
  // A clone's virtio-blk still reports the template's placeholder size to the guest:
  // resizing the drive (to the size it has) raises the config interrupt that updates it.
  const beforeRun =
    rootBytes !== null
      ? async () => {
          await qmp.execute("block_resize", { "node-name": ROOT_NODE, size: rootBytes });
        }
      : undefined;
  // The agent's socket is connected before the state loads (nothing is sent until the
  // guest runs): the guest was saved with its host connected, and a port found closed at
  // `cont` tells it the host left; it then drops what arrives until it sees the host back,
  // which cost each clone its first HELLOs (two retries, ~150 ms, measured).
  const agent = await AgentClient.connect(agentSocket, {
    signal,
    timeoutMs,
    ...agentOpts,
    beforeHello: () =>
      loadVmState(qmp, INCOMING_FD, { ignoreShared: c.ignoreShared, signal, ...(beforeRun ? { beforeRun } : {}) }).then(() =>
        mark("loaded"),
      ),
  });
  mark("agent");
  if (rootBytes !== null && agent.info?.root !== "mounted") {
    agent.close();
    throw new Error(`the guest did not mount its root disk (${agent.info?.root ?? "no answer"}); see the console log`);
  }
  return [qmp, agent] as const;
}
