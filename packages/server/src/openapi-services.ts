import { none, query } from "./openapi-parts.js";
import { json, type Operation, ok } from "./openapi-schemas.js";

// The operations around sandboxes: network policy, ports, desktop, images, teams, usage and keys.

export const SERVICE_OPERATIONS: Record<string, Operation> = {
  "GET /v1/sandboxes/:id/network": {
    summary: "The sandbox's address, egress policy, tunnels and whether the policy is applied",
    responses: { 200: ok("SandboxNetwork") },
  },
  "PUT /v1/sandboxes/:id/network": {
    summary: "Replace the egress policy of a running sandbox (a list, or {} for the server's default)",
    body: "UpdateNetworkRequest",
    responses: { 200: ok("SandboxNetwork") },
  },
  "POST /v1/sandboxes/:id/ports": {
    summary: "Expose a port (again: rotate its token); the answer is the only time the token is shown",
    body: "ExposePortRequest",
    responses: { 201: ok("ExposedPort") },
  },
  "GET /v1/sandboxes/:id/ports": { summary: "Exposed ports (no tokens)", responses: { 200: ok("ExposedPortList") } },
  "DELETE /v1/sandboxes/:id/ports/:port": { summary: "Stop exposing a port", responses: { 204: none("no longer exposed") } },
  "GET /v1/sandboxes/:id/desktop": {
    summary: "The display's size and state (409 NO_DISPLAY without one)",
    responses: { 200: ok("DesktopInfo") },
  },
  "POST /v1/sandboxes/:id/desktop/actions": {
    summary: "Perform one desktop action: its event, or as image/png (Accept, format=png) the screen after it, event in a header",
    body: "DesktopAction",
    parameters: query("format"),
    responses: { 200: { description: "DesktopEvent or PNG", content: { ...json("DesktopEvent").content, "image/png": {} } } },
  },
  "GET /v1/sandboxes/:id/desktop/events": {
    summary: "The desktop's event log (JSONL of DesktopEvent)",
    parameters: query("after_seq"),
    responses: { 200: { description: "JSONL", content: { "application/x-ndjson": {} } } },
  },
  "GET /v1/sandboxes/:id/desktop/screenshots/:sha256": {
    summary: "A screenshot of the log by its sha256",
    responses: { 200: { description: "PNG", content: { "image/png": {} } } },
  },
  "POST /v1/sandboxes/:id/desktop/replay": {
    summary: "Replay a recorded log into this sandbox and compare each screen",
    body: "DesktopReplayRequest",
    responses: { 200: ok("DesktopReplayReport") },
  },
  "GET /v1/sandboxes/:id/desktop/vnc": {
    summary: "The display live: a WebSocket upgrade carrying raw RFB (VNC) bytes, view only unless interactive=true",
    parameters: query("interactive"),
    responses: { 101: none("switching protocols: binary frames carry the RFB bytes") },
  },
  "POST /v1/sandboxes/:id/desktop/vnc": {
    summary: "Start VNC in the guest (view-only unless writable) and expose its port",
    body: "DesktopVncRequest",
    responses: { 201: ok("DesktopVnc") },
  },
  "ALL /ports/:id/:port": {
    summary: "An exposed port's HTTP and WebSockets, proxied (X-Sandtree-Token header or ?sandtree_token=)",
    security: [{ portToken: [] }],
    responses: { 200: none("the sandbox's answer") },
  },
  "ALL /ports/:id/:port/*": {
    summary: "An exposed port's HTTP and WebSockets, proxied (X-Sandtree-Token header or ?sandtree_token=)",
    security: [{ portToken: [] }],
    responses: { 200: none("the sandbox's answer") },
  },
  "GET /tcp/:id/:port": {
    summary: "Raw TCP to a sandbox port over a WebSocket (a port token, or an API key of the sandbox's team)",
    security: [{ portToken: [] }, { bearer: [] }],
    responses: { 101: none("switching protocols: binary frames carry the bytes") },
  },
  "GET /v1/images": { summary: "Images on the server", responses: { 200: ok("ImageList") } },
  "POST /v1/images/pull": {
    summary: "Pull an image from its registry",
    body: "PullImageRequest",
    responses: { 200: ok("Image") },
  },
  "POST /v1/images/import": {
    summary: "Import an OCI layout directory on the server's machine (admin)",
    body: "ImportImageRequest",
    responses: { 200: ok("Image") },
  },
  "GET /v1/images/aliases": { summary: "The image alias table", responses: { 200: ok("ImageAliasList") } },
  "PUT /v1/images/aliases": {
    summary: "Make a name stand for an image in creates and pulls (admin; the target must resolve)",
    body: "SetImageAliasRequest",
    responses: { 200: ok("ImageAlias") },
  },
  "DELETE /v1/images/aliases/:name": { summary: "Remove an image alias (admin)", responses: { 204: none("removed") } },
  "POST /v1/teams": { summary: "Create a team (admin)", body: "CreateTeamRequest", responses: { 201: ok("Team") } },
  "GET /v1/teams": { summary: "List teams (admin)", responses: { 200: ok("TeamList") } },
  "GET /v1/teams/:name/limits": { summary: "A team's limits and usage", responses: { 200: ok("TeamLimitsResponse") } },
  "GET /metrics": {
    summary: "Prometheus metrics of every team (an admin key, or the metrics token)",
    responses: { 200: { description: "Prometheus text format", content: { "text/plain": {} } } },
  },
  "GET /v1/usage": {
    summary: "Metered usage and cost per day, hour, label, sandbox or team (format=csv: text/csv)",
    parameters: query("from", "to", "group_by", "label_key", "format"),
    responses: { 200: { ...ok("UsageReport"), content: { ...json("UsageReport").content, "text/csv": {} } } },
  },
  "GET /v1/stats": {
    summary: "Creations, failures, concurrency and cost over a recent window",
    parameters: query("window_hours", "bucket_minutes"),
    responses: { 200: ok("Stats") },
  },
  "GET /v1/teams/:name/budget": {
    summary: "A team's monthly budget and month-to-date cost",
    responses: { 200: ok("TeamBudget") },
  },
  "PUT /v1/teams/:name/budget": {
    summary: "Set a team's monthly budget (admin); null removes it",
    body: "UpdateTeamBudgetRequest",
    responses: { 200: ok("TeamBudget") },
  },
  "PUT /v1/teams/:name/limits": {
    summary: "Change a team's limits (admin); null restores a default",
    body: "UpdateTeamLimitsRequest",
    responses: { 200: ok("TeamLimitsResponse") },
  },
  "POST /v1/keys": {
    summary: "Create an API key (admin); the answer is the only time the key is shown",
    body: "CreateApiKeyRequest",
    responses: { 201: ok("CreatedApiKey") },
  },
  "GET /v1/keys": { summary: "List API keys (admin)", responses: { 200: ok("ApiKeyList") } },
  "DELETE /v1/keys/:id": { summary: "Revoke an API key (admin)", responses: { 200: ok("ApiKey") } },
};
