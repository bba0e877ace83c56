import { z } from "zod";

/** The accelerators a sandbox's VM runs under: KVM (hardware) or TCG (QEMU's software CPU). */
export const ACCELS = ["kvm", "tcg"] as const;
export const Accel = z.enum(ACCELS);
export type Accel = z.infer<typeof Accel>;

/** What a server is told to use: one of them, or `auto` (KVM when a trial boot works, else TCG). */
export const ACCEL_CHOICES = ["auto", ...ACCELS] as const;
export const AccelChoice = z.enum(ACCEL_CHOICES);
export type AccelChoice = z.infer<typeof AccelChoice>;
