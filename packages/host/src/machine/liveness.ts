/**
 * The liveness watchdog of a machine. A guest that stops answering (its VMM stopped or hung)
 * would leave every call waiting forever: its agent is pinged every few seconds (one ping at a
 * time), and a ping unanswered for `deadlineMs` calls `onMiss` once. A ping counts as missed only
 * if, for its whole life, the guest was expected to answer: not quiet (held still on purpose by a
 * freeze or a memory save, paused, held on a host disk error, no agent connection, or quiet for
 * the caller's own reasons) and no hold or pause began or ended meanwhile (`epoch` unchanged).
 * A slow guest under heavy load answers late, but answers.
 *
 * While no call is waiting on the guest (`busy` false) a hung guest holds nobody up: it is then
 * pinged only every `idleIntervalMs`, so an idle sandbox is not woken every few seconds (each ping
 * wakes its vCPU and QEMU; 300 idle sandboxes are 60 wake-ups a second). The first check after a
 * call starts pings at once if the last ping is older than the busy interval.
 */
export interface LivenessOptions {
  deadlineMs: number;
  /** The current agent connection (a ping through another one does not count). */
  connection: () => { ping(): Promise<void>; readonly busy?: boolean } | null;
  /** Pings while no call is waiting on the guest, at most this often (default 60 s). */
  idleIntervalMs?: number;
  quiet: () => boolean;
  epoch: () => number;
  /** The machine ended (or was replaced): the watchdog stops. */
  ended: () => boolean;
  onMiss: () => void;
}

/** Starts the watchdog; returns its stop function. */
export function startLiveness(o: LivenessOptions): () => void {
  if (!(o.deadlineMs > 0)) return () => {};
  let inFlight = false;
  let lastPing = Date.now();
  const interval = Math.min(5000, Math.max(200, o.deadlineMs / 4));
  const idleInterval = Math.max(interval, o.idleIntervalMs ?? 60_000);
  const timer = setInterval(() => {
    if (o.ended()) return clearInterval(timer);
    const conn = o.connection();
    if (inFlight || o.quiet() || !conn) return;
    if (conn.busy === false && Date.now() - lastPing < idleInterval) return;
    inFlight = true;
    lastPing = Date.now();
    const epoch = o.epoch();
    let settled = false;
    const miss = setTimeout(() => {
      settled = true;
      inFlight = false;
      const counted = !o.ended() && o.connection() === conn && !o.quiet() && o.epoch() === epoch;
      if (!counted) return;
      clearInterval(timer);
      o.onMiss();
    }, o.deadlineMs);
    miss.unref();
    // A closed connection is not a miss: the exit supervision or a reconnect deals with it.
    conn
      .ping()
      .catch(() => {})
      .finally(() => {
        if (settled) return;
        clearTimeout(miss);
        inFlight = false;
      });
  }, interval);
  timer.unref();
  return () => clearInterval(timer);
}
