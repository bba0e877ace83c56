/** What a user is told when a VM does not start (the technical detail goes to the server's log). */
export function startFailureSentence(
  timedOut: boolean,
  exitedItself: boolean,
  deadlineMs: number,
  elapsedMs = deadlineMs,
  /** QEMU exited 0 on its own: with -no-reboot, its guest reset (a reboot, a panic, a triple fault) or powered off. */
  guestReset = false,
  /** Boots in a row whose guest lost its timer (guest-timer.ts); 0 when that was not the failure. */
  timerLostBoots = 0,
): string {
  // Time spent waiting for a host CPU does not count: said when the wait was longer for it.
  const waited =
    elapsedMs - deadlineMs >= 1000 ? ` (${Math.round(elapsedMs / 1000)} s in all, the rest waiting for a host CPU)` : "";
  if (timerLostBoots > 0)
    return `the VM did not start: its guest lost its timer while booting, ${timerLostBoots} boot${timerLostBoots === 1 ? "" : "s"} in a row (its vCPU was starved while the kernel measured its APIC timer: the host is overloaded; the server's log says more)`;
  if (timedOut)
    return `the VM did not start: its guest did not answer within ${Math.round(deadlineMs / 1000)} s${waited} (its console is in the sandbox's logs)`;
  if (exitedItself && guestReset)
    return "the VM did not start: its guest reset or powered off while booting (its console is in the sandbox's logs)";
  if (exitedItself) return "the VM did not start: QEMU exited while starting it (the server's log says why)";
  return "the VM did not start (the server's log says why)";
}
