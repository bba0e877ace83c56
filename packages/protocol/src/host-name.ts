import { z } from "zod";

/** A fleet host's name (its own file: sandbox.ts and fleet.ts both use it). */
export const HostName = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/, "host names are 1-63 letters, digits, '.', '_', '-'");
