import { z } from "zod";

/** Absolute or relative (to /) path inside the sandbox, without NUL. */
export const SandboxPath = z
  .string()
  .min(1)
  .max(4096)
  .refine((p) => !p.includes("\0"), "must not contain NUL");

export const FileQuery = z.strictObject({
  path: SandboxPath,
  offset: z.coerce.number().int().min(0).optional(),
  length: z.coerce.number().int().min(0).optional(),
  mode: z
    .string()
    .regex(/^[0-7]{3,4}$/, "an octal mode like 644")
    .optional(),
  recursive: z.enum(["true", "false", "1", "0"]).optional(),
});

export const FileStat = z.object({
  path: z.string(),
  name: z.string().optional(),
  type: z.enum(["file", "dir", "symlink", "other"]),
  size: z.number(),
  mode: z.number().int(),
  uid: z.number().int(),
  gid: z.number().int(),
  mtime_ms: z.number(),
  target: z.string().optional(),
});
export type FileStat = z.infer<typeof FileStat>;

export const FileList = z.object({ path: z.string(), entries: z.array(FileStat) });
export type FileList = z.infer<typeof FileList>;

export const MkdirRequest = z.strictObject({
  path: SandboxPath,
  parents: z.boolean().default(true),
  mode: z.number().int().min(0).max(0o7777).default(0o755),
});
export type MkdirRequest = z.input<typeof MkdirRequest>;

export const UploadResult = z.object({ path: z.string(), bytes: z.number().int() });
export type UploadResult = z.infer<typeof UploadResult>;
