import { ApiKey, ApiKeyList, CreatedApiKey } from "@sandtree/protocol";
import type { HttpClient, RequestOptions } from "./http.js";

/** API keys (admin keys only). */
export class Keys {
  constructor(private readonly http: HttpClient) {}

  /** A new key for `team`; `key` in the answer is the only time the secret is shown. */
  create(team: string, options: RequestOptions & { admin?: boolean } = {}): Promise<CreatedApiKey> {
    const { admin, ...rest } = options;
    return this.http.json(CreatedApiKey, { ...rest, method: "POST", path: "/v1/keys", json: { team, admin: admin ?? false } });
  }

  /** Every key, by prefix (never the secret). */
  async list(options: RequestOptions = {}): Promise<ApiKey[]> {
    return (await this.http.json(ApiKeyList, { ...options, method: "GET", path: "/v1/keys" })).keys;
  }

  /** Revokes a key; its next request is refused. */
  revoke(id: string, options: RequestOptions = {}): Promise<ApiKey> {
    return this.http.json(ApiKey, { ...options, method: "DELETE", path: `/v1/keys/${encodeURIComponent(id)}` });
  }
}
