import { z } from "zod";
import { SandboxStatus } from "./sandbox.js";

const labelKey = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._\-/]{0,62}$/, "label keys are 1-63 letters, digits, '.', '_', '-', '/'");
const sandboxId = z.string().min(1).max(64);

/** Exactly one of `ids` or `labels` (a label selector matches sandboxes carrying all of them). */
export const BulkDeleteRequest = z
  .strictObject({
    ids: z.array(sandboxId).min(1).max(1000).optional(),
    labels: z.record(labelKey, z.string().max(256)).optional(),
  })
  .refine((r) => (r.ids === undefined) !== (r.labels === undefined), {
    message: "give exactly one of ids or labels",
    path: ["ids"],
  })
  .refine((r) => r.labels === undefined || Object.keys(r.labels).length > 0, {
    message: "labels must name at least one label",
    path: ["labels"],
  });
export type BulkDeleteRequest = z.input<typeof BulkDeleteRequest>;

export const BulkDeleteResult = z.object({ deleted: z.array(z.string()), not_found: z.array(z.string()) });
export type BulkDeleteResult = z.infer<typeof BulkDeleteResult>;

export const BatchStatusRequest = z.strictObject({ ids: z.array(sandboxId).min(1).max(100) });
export type BatchStatusRequest = z.input<typeof BatchStatusRequest>;

export const BatchStatusResult = z.object({
  sandboxes: z.array(z.object({ id: z.string(), status: SandboxStatus, error_reason: z.string().nullable() })),
  not_found: z.array(z.string()),
});
export type BatchStatusResult = z.infer<typeof BatchStatusResult>;
