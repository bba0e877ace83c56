/** What a user is told when a VM does not start (the technical detail goes to the server's log). */
export function startFailureSentence(timedOut: boolean, exitedItself: boolean, deadlineMs: number): string {
  if (timedOut)
    return `the VM did not start: its guest did not answer within ${Math.round(deadlineMs / 1000)} s (its console is in the sandbox's logs)`;
  if (exitedItself) return "the VM did not start: QEMU exited while starting it (the server's log says why)";
  return "the VM did not start (the server's log says why)";
}
