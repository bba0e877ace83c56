import { Image, ImageAlias, ImageAliasList, ImageList, type RegistryCredentials } from "@sandtree/protocol";
import type { HttpClient, RequestOptions } from "./http.js";

export interface PullImageOptions extends RequestOptions {
  /** For private registries. */
  credentials?: RegistryCredentials;
}

export class Images {
  constructor(private readonly http: HttpClient) {}

  /** Images the server has locally. */
  async list(options: RequestOptions = {}): Promise<Image[]> {
    const page = await this.http.json(ImageList, { ...options, method: "GET", path: "/v1/images" });
    return page.images;
  }

  /** Pulls an image from its registry (can take minutes: no deadline unless `timeoutMs` is given). */
  pull(ref: string, options: PullImageOptions = {}): Promise<Image> {
    const { credentials, ...request } = options;
    const body = { image: ref, ...(credentials ? { registry_credentials: credentials } : {}) };
    return this.http.postLong(Image, "/v1/images/pull", body, request);
  }

  /** Imports an OCI image layout directory that lies on the server's host (admin keys only). */
  import(path: string, name: string, options: RequestOptions & { layoutRef?: string } = {}): Promise<Image> {
    const { layoutRef, ...request } = options;
    return this.http.postLong(
      Image,
      "/v1/images/import",
      { path, name, ...(layoutRef ? { layout_ref: layoutRef } : {}) },
      request,
    );
  }

  /** The image alias table: names users' code gives (`python:3.11-slim`) mapped to images here. */
  async listAliases(options: RequestOptions = {}): Promise<ImageAlias[]> {
    return (await this.http.json(ImageAliasList, { ...options, method: "GET", path: "/v1/images/aliases" })).aliases;
  }

  /** Makes `name` stand for the image `target` in every create and pull (admin keys only; the target must resolve). */
  setAlias(name: string, target: string, options: RequestOptions = {}): Promise<ImageAlias> {
    return this.http.json(ImageAlias, { ...options, method: "PUT", path: "/v1/images/aliases", json: { name, target } });
  }

  /** Removes an alias (admin keys only); sandboxes created through it keep their image. */
  deleteAlias(name: string, options: RequestOptions = {}): Promise<void> {
    return this.http.empty({ ...options, method: "DELETE", path: `/v1/images/aliases/${encodeURIComponent(name)}` });
  }
}
