import { z } from "zod";

// The fields a command takes in exec, job and PTY requests, written once.

const noNul = (s: string) => !s.includes("\0");
const NO_NUL = "must not contain NUL";
const envKey = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,255}$/, "environment variable names are letters, digits and '_'");

/** A string runs under `/bin/sh -c`; an array is the argv (exec) or shell-quoted words (jobs). */
export const commandField = z.union([
  z.string().min(1).max(1_048_576).refine(noNul, NO_NUL),
  z.array(z.string().max(1_048_576).refine(noNul, NO_NUL)).min(1).max(65_536),
]);

/** A PTY's command: one string for `/bin/sh -c`, as the query of its WebSocket carries it. */
export const shellCommandField = z.string().min(1).max(65_536).refine(noNul, NO_NUL);

export const cwdField = z.string().min(1).max(4096).refine(noNul, NO_NUL);

export const envField = z.record(envKey, z.string().max(32_768).refine(noNul, NO_NUL)).default({});

export const userField = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9_.-]+$/, "a user name or a numeric uid");
