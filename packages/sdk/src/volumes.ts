import { CreateVolumeRequest, Volume, VolumeList } from "@sandtree/protocol";
import { Files } from "./files.js";
import type { HttpClient, RequestOptions } from "./http.js";

function volumePath(ref: string): string {
  return `/v1/volumes/${encodeURIComponent(ref)}`;
}

/**
 * Volumes: directories that outlive sandboxes, shared by those that mount them (docs/volumes.md).
 * Every call takes a volume's id or its name.
 */
export class Volumes {
  /** A volume's files, with no sandbox: `volumes.files.write("data", "/a.txt", "hi")`. */
  readonly files: Files;

  constructor(private readonly http: HttpClient) {
    this.files = new Files(http, (ref) => `${volumePath(ref)}/files`);
  }

  create(request: CreateVolumeRequest, options: RequestOptions = {}): Promise<Volume> {
    return this.http.json(Volume, { ...options, method: "POST", path: "/v1/volumes", json: CreateVolumeRequest.parse(request) });
  }

  async list(options: RequestOptions = {}): Promise<Volume[]> {
    return (await this.http.json(VolumeList, { ...options, method: "GET", path: "/v1/volumes" })).volumes;
  }

  /** The volume, its bytes measured again. */
  get(ref: string, options: RequestOptions = {}): Promise<Volume> {
    return this.http.json(Volume, { ...options, method: "GET", path: volumePath(ref) });
  }

  /** Deletes it and its files; refused (VOLUME_IN_USE, a ConflictError) while a sandbox mounts it. */
  delete(ref: string, options: RequestOptions = {}): Promise<void> {
    return this.http.empty({ ...options, method: "DELETE", path: volumePath(ref) });
  }
}
