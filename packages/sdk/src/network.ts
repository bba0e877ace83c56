import { SandboxNetwork, type UpdateNetworkRequest } from "@sandtree/protocol";
import type { HttpClient, RequestOptions } from "./http.js";
import { sandboxPath } from "./sandbox-path.js";

export function getNetwork(http: HttpClient, id: string, options: RequestOptions = {}): Promise<SandboxNetwork> {
  return http.json(SandboxNetwork, { ...options, method: "GET", path: `${sandboxPath(id)}/network` });
}

export function setNetwork(
  http: HttpClient,
  id: string,
  policy: UpdateNetworkRequest,
  options: RequestOptions = {},
): Promise<SandboxNetwork> {
  // Replacing a policy with the same policy ends in the same state: safe to retry.
  return http.json(SandboxNetwork, {
    ...options,
    method: "PUT",
    path: `${sandboxPath(id)}/network`,
    json: policy,
    idempotent: true,
  });
}
