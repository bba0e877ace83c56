import type { Machine } from "@sandtree/host";
import { type Sandbox, SandtreeError } from "@sandtree/protocol";
import type { Store } from "../../store/store.js";
import type { HostBundles } from "./host-bundles.js";

/** What pausing and resuming a machine on its host's bundle need. */
export interface ControlDeps {
  store: Store;
  bundles: HostBundles;
}

/** Stops a RUNNING sandbox's CPUs on its host; the record follows (resumed again when it changed meanwhile). */
export async function pauseHere(d: ControlDeps, id: string, machine: Machine): Promise<void> {
  await d.bundles.of(id).machines.control(id, machine, "pause");
  if (!(await d.store.updateSandbox(id, { status: "PAUSED" }, ["RUNNING"]))) {
    await machine.resume().catch(() => {});
    throw new SandtreeError("SANDBOX_NOT_RUNNING", `sandbox ${id} changed state while pausing`, { id });
  }
  await d.store.addEvent(id, "paused");
}

/** Continues a PAUSED sandbox on its host; the guest clock is set right after the resume. */
export async function resumeHere(d: ControlDeps, sb: Sandbox): Promise<void> {
  const id = sb.id;
  const machine = d.bundles.machine(id);
  if (sb.status !== "PAUSED" || !machine || machine.exit || d.bundles.adoption(id)) {
    throw new SandtreeError("CONFLICT", `sandbox ${id} is ${sb.status}, not PAUSED`, { id, status: sb.status });
  }
  await d.bundles.of(id).machines.control(id, machine, "resume");
  machine.syncClock();
  await d.store.updateSandbox(id, { status: "RUNNING" }, ["PAUSED"]);
  await d.store.addEvent(id, "resumed");
}
