import { readdirSync, readFileSync } from "node:fs";

/**
 * Each thread's time spent runnable but waiting for a CPU (ns), from
 * `/proc/PID/task/TID/schedstat` ("run_ns wait_ns slices"); empty when the process is gone or
 * the kernel keeps no schedstat.
 */
function threadWaitsNs(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) {
    try {
      const wait = Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ")[1]);
      if (Number.isFinite(wait)) out.set(tid, wait);
    } catch {}
  }
  return out;
}

/**
 * How long (ms) the process's most-delayed thread has waited for a host CPU since this call: a
 * VM's vCPU thread on a host with more runnable threads than cores. A hung guest does not wait
 * (it halts or spins on a CPU it gets); a starved one does, and its boot deadline should not
 * count that time (see Deadline's allowance).
 */
export function cpuWaitSince(pid: number): () => number {
  const base = threadWaitsNs(pid);
  return () => {
    let most = 0;
    for (const [tid, wait] of threadWaitsNs(pid)) most = Math.max(most, wait - (base.get(tid) ?? 0));
    return Math.floor(most / 1e6);
  };
}
