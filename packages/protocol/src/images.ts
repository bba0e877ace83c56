import { z } from "zod";
import { RegistryCredentials } from "./sandbox.js";

export const Image = z.object({
  ref: z.string(),
  digest: z.string(),
  source: z.enum(["local", "registry"]),
  virtual_size_bytes: z.number(),
  created_at: z.string().nullable(),
});
export type Image = z.infer<typeof Image>;

export const ImageList = z.object({ images: z.array(Image) });
export type ImageList = z.infer<typeof ImageList>;

export const PullImageRequest = z.strictObject({
  image: z.string().min(1).max(512),
  registry_credentials: RegistryCredentials.optional(),
});
export type PullImageRequest = z.input<typeof PullImageRequest>;

/** Imports an OCI image layout directory on the server's host (admin keys only). */
export const ImportImageRequest = z.strictObject({
  path: z.string().min(1).max(4096),
  name: z.string().min(1).max(512),
  /** Which image of the layout (its ref name annotation or a digest); optional when it holds one. */
  layout_ref: z.string().min(1).max(512).optional(),
});
export type ImportImageRequest = z.input<typeof ImportImageRequest>;
