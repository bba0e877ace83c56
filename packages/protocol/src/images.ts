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

/** An admin-set image alias: `name` (as Docker compares names) stands for the image `target`. */
export const ImageAlias = z.object({
  name: z.string(),
  target: z.string(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type ImageAlias = z.infer<typeof ImageAlias>;

export const ImageAliasList = z.object({ aliases: z.array(ImageAlias) });
export type ImageAliasList = z.infer<typeof ImageAliasList>;

/** Sets an image alias (admin keys only); the target must resolve when it is set. */
export const SetImageAliasRequest = z.strictObject({
  name: z.string().min(1).max(512),
  target: z.string().min(1).max(512),
});
export type SetImageAliasRequest = z.input<typeof SetImageAliasRequest>;
