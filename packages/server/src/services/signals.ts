import { SandtreeError } from "@sandtree/protocol";

const SIGNALS: Record<string, number> = {
  SIGHUP: 1,
  SIGINT: 2,
  SIGQUIT: 3,
  SIGKILL: 9,
  SIGUSR1: 10,
  SIGUSR2: 12,
  SIGTERM: 15,
  SIGCONT: 18,
  SIGSTOP: 19,
};

/** A signal name or number as the guest's (x86-64 Linux) number; 400 for an unknown name. */
export function signalNumber(signal: string | number): number {
  const num = typeof signal === "number" ? signal : SIGNALS[signal];
  if (num === undefined) throw new SandtreeError("VALIDATION_FAILED", `unknown signal ${signal}`, { field: "signal" });
  return num;
}
