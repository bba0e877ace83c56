import { SandtreeError, SIGNAL_NUMBERS } from "@sandtree/protocol";

/** A signal name or number as the guest's (x86-64 Linux) number; 400 for an unknown name. */
export function signalNumber(signal: string | number): number {
  const num = typeof signal === "number" ? signal : SIGNAL_NUMBERS[signal as keyof typeof SIGNAL_NUMBERS];
  if (num === undefined) throw new SandtreeError("VALIDATION_FAILED", `unknown signal ${signal}`, { field: "signal" });
  return num;
}
