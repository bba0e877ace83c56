import { z } from "zod";

/** The signals the API accepts by name, with their numbers in the guest (x86-64 Linux). */
export const SIGNAL_NUMBERS = {
  SIGHUP: 1,
  SIGINT: 2,
  SIGQUIT: 3,
  SIGKILL: 9,
  SIGUSR1: 10,
  SIGUSR2: 12,
  SIGTERM: 15,
  SIGCONT: 18,
  SIGSTOP: 19,
} as const;
export type SignalName = keyof typeof SIGNAL_NUMBERS;

const names = Object.keys(SIGNAL_NUMBERS) as [SignalName, ...SignalName[]];

/** A signal by name or by number (1-64), as exec, job and PTY requests take it. */
export const Signal = z.union([z.number().int().min(1).max(64), z.enum(names)]);
export type Signal = z.infer<typeof Signal>;
