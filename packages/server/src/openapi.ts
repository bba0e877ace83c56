import {
  ApiKey,
  ApiKeyList,
  BatchStatusRequest,
  BatchStatusResult,
  BulkDeleteRequest,
  BulkDeleteResult,
  Checkpoint,
  CheckpointList,
  CreateApiKeyRequest,
  CreateCheckpointRequest,
  CreatedApiKey,
  CreateSandboxRequest,
  CreateTeamRequest,
  DesktopAction,
  DesktopEvent,
  DesktopInfo,
  DesktopReplayReport,
  DesktopReplayRequest,
  DesktopVnc,
  DesktopVncRequest,
  ErrorBody,
  ExecEvent,
  ExecRequest,
  ExecResult,
  ExposedPort,
  ExposedPortList,
  ExposePortRequest,
  FileList,
  FileStat,
  ForkRequest,
  Image,
  ImageAlias,
  ImageAliasList,
  ImageList,
  ImportImageRequest,
  Job,
  JobList,
  KillJobRequest,
  MkdirRequest,
  PtyQuery,
  PullImageRequest,
  ResetRequest,
  Sandbox,
  SandboxList,
  SandboxLogs,
  SandboxNetwork,
  ServerVersion,
  SetImageAliasRequest,
  SignalRequest,
  StartJobRequest,
  Stats,
  Team,
  TeamBudget,
  TeamLimitsResponse,
  TeamList,
  UpdateNetworkRequest,
  UpdateTeamBudgetRequest,
  UpdateTeamLimitsRequest,
  UploadResult,
  UsageReport,
} from "@sandtree/protocol";
import { z } from "zod";
import { FLEET_OPERATIONS, FLEET_SCHEMAS } from "./openapi-fleet.js";
import { PRIME_OPERATIONS } from "./openapi-prime.js";
import { VOLUME_OPERATIONS, VOLUME_SCHEMAS } from "./openapi-volumes.js";
import { VERSION } from "./version.js";

const schemas = {
  BulkDeleteRequest,
  BulkDeleteResult,
  BatchStatusRequest,
  BatchStatusResult,
  StartJobRequest,
  Job,
  JobList,
  KillJobRequest,
  CreateSandboxRequest,
  Sandbox,
  SandboxList,
  SandboxLogs,
  ExecRequest,
  ExecResult,
  ExecEvent,
  SignalRequest,
  FileStat,
  FileList,
  MkdirRequest,
  UploadResult,
  Image,
  ImageList,
  PullImageRequest,
  ImportImageRequest,
  ImageAlias,
  ImageAliasList,
  SetImageAliasRequest,
  ErrorBody,
  CreateTeamRequest,
  Team,
  TeamList,
  CreateApiKeyRequest,
  ApiKey,
  CreatedApiKey,
  ApiKeyList,
  UpdateTeamLimitsRequest,
  TeamLimitsResponse,
  ExposePortRequest,
  ExposedPort,
  ExposedPortList,
  SandboxNetwork,
  UpdateNetworkRequest,
  Checkpoint,
  CheckpointList,
  CreateCheckpointRequest,
  ForkRequest,
  ResetRequest,
  PtyQuery,
  ServerVersion,
  UsageReport,
  Stats,
  TeamBudget,
  UpdateTeamBudgetRequest,
  DesktopAction,
  DesktopEvent,
  DesktopInfo,
  DesktopReplayRequest,
  DesktopReplayReport,
  DesktopVnc,
  DesktopVncRequest,
  ForkManyResult: z.object({ sandboxes: z.array(Sandbox), checkpoint_id: z.string() }),
  ...FLEET_SCHEMAS,
  ...VOLUME_SCHEMAS,
};

type SchemaName = keyof typeof schemas;
const ref = (name: SchemaName) => ({ $ref: `#/components/schemas/${name}` });
const json = (name: SchemaName) => ({ content: { "application/json": { schema: ref(name) } } });
const ok = (name: SchemaName) => ({ description: name, ...json(name) });
const bytes = { description: "bytes", content: { "application/octet-stream": {} } };
const none = (description: string) => ({ description });
const query = (...names: string[]) => names.map((n) => ({ name: n, in: "query", schema: { type: "string" } }));
const outputQuery = query("stream", "offset", "length");
const pathQuery = { name: "path", in: "query", required: true, schema: { type: "string" } };

interface Operation {
  summary: string;
  body?: SchemaName | "bytes";
  parameters?: object[];
  responses: Record<string, object>;
  /** No API key (or another credential). */
  security?: object[];
}

/**
 * What each route takes and answers, keyed by `METHOD /path` as fastify registers it. The
 * document's paths come from the routes the app registered (openapi.test.ts checks that every
 * one is described here), so a route cannot be served without being documented.
 */
const OPERATIONS: Record<string, Operation> = {
  "GET /healthz": { summary: "Liveness and version (no key)", security: [], responses: { 200: none("{ok, version}") } },
  "GET /v1/openapi.json": { summary: "This document (no key)", security: [], responses: { 200: none("OpenAPI 3.1") } },
  "GET /v1/version": { summary: "The server's version (no key)", security: [], responses: { 200: ok("ServerVersion") } },
  "POST /v1/sandboxes": {
    summary: "Create a sandbox (with checkpoint_id: restore one; image and disk size come from it)",
    body: "CreateSandboxRequest",
    responses: { 201: ok("Sandbox"), 200: { ...ok("Sandbox"), description: "idempotency_key replay" } },
  },
  "GET /v1/sandboxes": {
    summary: "List sandboxes (admin keys: each with its host; host=NAME: only that host's)",
    parameters: query("status", "label", "host", "limit", "cursor"),
    responses: { 200: ok("SandboxList") },
  },
  "GET /v1/sandboxes/:id": { summary: "One sandbox", responses: { 200: ok("Sandbox") } },
  "DELETE /v1/sandboxes/:id": { summary: "Terminate a sandbox", responses: { 200: ok("Sandbox") } },
  "GET /v1/sandboxes/:id/logs": {
    summary: "Lifecycle events and the end of the console",
    parameters: query("tail_bytes"),
    responses: { 200: ok("SandboxLogs") },
  },
  "POST /v1/sandboxes/bulk-delete": {
    summary: "Terminate sandboxes by ids or labels",
    body: "BulkDeleteRequest",
    responses: { 200: ok("BulkDeleteResult") },
  },
  "POST /v1/sandboxes/batch-status": {
    summary: "Statuses of many sandboxes",
    body: "BatchStatusRequest",
    responses: { 200: ok("BatchStatusResult") },
  },
  "POST /v1/sandboxes/:id/pause": {
    summary: "Stop a sandbox's CPUs, keeping memory and disk",
    responses: { 200: ok("Sandbox") },
  },
  "POST /v1/sandboxes/:id/resume": { summary: "Continue a paused sandbox", responses: { 200: ok("Sandbox") } },
  "POST /v1/sandboxes/:id/exec": {
    summary:
      "Run a command: buffered JSON, or streamed with Accept application/vnd.sandtree.exec-stream (binary records), application/x-ndjson or text/event-stream",
    body: "ExecRequest",
    responses: {
      200: {
        description: "ExecResult, or a stream of ExecEvent",
        content: {
          "application/json": { schema: ref("ExecResult") },
          "application/x-ndjson": { schema: ref("ExecEvent") },
          "text/event-stream": { schema: ref("ExecEvent") },
          // Records of a 1-byte kind (1 stdout, 2 stderr, 3 an ExecEvent as JSON), a 4-byte big-endian length, the bytes.
          "application/vnd.sandtree.exec-stream": { schema: { type: "string", format: "binary" } },
        },
      },
    },
  },
  "POST /v1/sandboxes/:id/execs/:execId/signal": {
    summary: "Signal a streamed exec's process group",
    body: "SignalRequest",
    responses: { 204: none("sent") },
  },
  "POST /v1/sandboxes/:id/execs/:execId/stdin": {
    summary: "Write to a streamed exec's stdin (stdin_open); an empty body closes it",
    body: "bytes",
    responses: { 204: none("written") },
  },
  "GET /v1/sandboxes/:id/execs/:execId/output": {
    summary: "A byte range of a buffered exec's whole stdout or stderr",
    parameters: outputQuery,
    responses: { 200: bytes },
  },
  "GET /v1/sandboxes/:id/pty": {
    summary: `An interactive terminal: a WebSocket upgrade (subprotocol sandtree.pty.v1); query: PtyQuery`,
    parameters: query("command", "rows", "cols", "cwd", "user"),
    responses: { 101: none("switching protocols: binary frames are terminal bytes, text frames PTY messages") },
  },
  "GET /v1/sandboxes/:id/jobs": { summary: "A sandbox's background jobs", responses: { 200: ok("JobList") } },
  "POST /v1/sandboxes/:id/jobs": { summary: "Start a background job", body: "StartJobRequest", responses: { 201: ok("Job") } },
  "GET /v1/sandboxes/:id/jobs/:jobId": { summary: "A job's state and the end of its output", responses: { 200: ok("Job") } },
  "GET /v1/sandboxes/:id/jobs/:jobId/output": {
    summary: "A byte range of a job's stdout or stderr",
    parameters: outputQuery,
    responses: { 200: bytes },
  },
  "POST /v1/sandboxes/:id/jobs/:jobId/kill": {
    summary: "Signal a job's process group",
    body: "KillJobRequest",
    responses: { 200: ok("Job") },
  },
  "GET /v1/sandboxes/:id/files": {
    summary: "Download a file (or a byte range: offset, length)",
    parameters: [pathQuery, ...query("offset", "length")],
    responses: { 200: bytes },
  },
  "PUT /v1/sandboxes/:id/files": {
    summary: "Upload a file (streamed; parents are created)",
    parameters: [pathQuery, ...query("mode")],
    body: "bytes",
    responses: { 200: ok("UploadResult") },
  },
  "DELETE /v1/sandboxes/:id/files": {
    summary: "Remove a file or directory",
    parameters: [pathQuery, ...query("recursive")],
    responses: { 204: none("removed") },
  },
  "GET /v1/sandboxes/:id/files/stat": { summary: "Stat a path", parameters: [pathQuery], responses: { 200: ok("FileStat") } },
  "GET /v1/sandboxes/:id/files/list": {
    summary: "List a directory",
    parameters: [pathQuery],
    responses: { 200: ok("FileList") },
  },
  "POST /v1/sandboxes/:id/files/mkdir": { summary: "Make a directory", body: "MkdirRequest", responses: { 201: ok("FileStat") } },
  "POST /v1/sandboxes/:id/checkpoints": {
    summary: "Checkpoint a sandbox's filesystem (include_memory: its memory and processes too)",
    body: "CreateCheckpointRequest",
    responses: { 201: ok("Checkpoint") },
  },
  "GET /v1/sandboxes/:id/checkpoints": { summary: "A sandbox's checkpoints", responses: { 200: ok("CheckpointList") } },
  "GET /v1/checkpoints": { summary: "The team's checkpoints", responses: { 200: ok("CheckpointList") } },
  "GET /v1/checkpoints/:cid": { summary: "One checkpoint", responses: { 200: ok("Checkpoint") } },
  "DELETE /v1/checkpoints/:cid": { summary: "Delete a checkpoint", responses: { 200: ok("Checkpoint") } },
  "POST /v1/sandboxes/:id/fork": {
    summary: "Checkpoint, start a child once FROZEN (count: that many children)",
    body: "ForkRequest",
    responses: { 201: { description: "Sandbox, or {sandboxes, checkpoint_id} with count", ...json("Sandbox") } },
  },
  "POST /v1/sandboxes/:id/reset": {
    summary: "Put a running sandbox back to a memory checkpoint's state, keeping its id",
    body: "ResetRequest",
    responses: { 200: ok("Sandbox") },
  },
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
  ...FLEET_OPERATIONS,
  ...PRIME_OPERATIONS,
  ...VOLUME_OPERATIONS,
};

/** A route as fastify's onRoute hook reports it. */
export interface RegisteredRoute {
  method: string | string[];
  url: string;
}

/** The methods a route answers, as upper case; `all` routes are keyed "ALL"; HEAD (added for GET) is left out. */
export function routeKeys(route: RegisteredRoute): string[] {
  const methods = Array.isArray(route.method) ? route.method : [route.method];
  if (methods.length > 4) return [`ALL ${route.url}`];
  return methods.filter((m) => m.toUpperCase() !== "HEAD").map((m) => `${m.toUpperCase()} ${route.url}`);
}

/** `/v1/sandboxes/:id/ports/:port` -> `/v1/sandboxes/{id}/ports/{port}`; a trailing `*` is `{path}`. */
function openApiPath(url: string): { path: string; params: string[] } {
  const params: string[] = [];
  const path = url
    .split("/")
    .map((seg) => {
      if (seg.startsWith(":")) {
        params.push(seg.slice(1));
        return `{${seg.slice(1)}}`;
      }
      if (seg === "*") {
        params.push("path");
        return "{path}";
      }
      return seg;
    })
    .join("/");
  return { path, params };
}

const ALL_METHODS = ["get", "put", "post", "delete", "patch", "options"];

/** The routes the app registered that OPERATIONS does not describe (openapi.test.ts wants none). */
export function undocumentedRoutes(routes: readonly RegisteredRoute[]): string[] {
  return routes.flatMap(routeKeys).filter((k) => !OPERATIONS[k]);
}

/** OpenAPI 3.1 of every registered route, with the zod schemas the server validates with. */
export function openApiDocument(routes: readonly RegisteredRoute[]): object {
  const components = Object.fromEntries(
    Object.entries(schemas).map(([k, s]) => [k, z.toJSONSchema(s as z.ZodType, { io: "input", unrepresentable: "any" })]),
  );
  const paths: Record<string, Record<string, object>> = {};
  for (const route of routes) {
    for (const key of routeKeys(route)) {
      const [method = "", url = ""] = key.split(" ");
      const op = OPERATIONS[key] ?? { summary: "(undocumented)", responses: {} };
      const { path, params } = openApiPath(url);
      const pathParams = params.map((n) => ({ name: n, in: "path", required: true, schema: { type: "string" } }));
      const operation = {
        summary: op.summary,
        parameters: [...pathParams, ...(op.parameters ?? [])],
        ...(op.body === "bytes"
          ? { requestBody: { content: { "application/octet-stream": {} } } }
          : op.body
            ? { requestBody: json(op.body) }
            : {}),
        responses: { ...op.responses, default: { description: "error", ...json("ErrorBody") } },
        ...(op.security ? { security: op.security } : {}),
      };
      paths[path] ??= {};
      for (const m of method === "ALL" ? ALL_METHODS : [method.toLowerCase()]) paths[path][m] = operation;
    }
  }
  return {
    openapi: "3.1.0",
    info: { title: "sandtree", version: VERSION },
    components: {
      schemas: components,
      securitySchemes: {
        bearer: { type: "http", scheme: "bearer" },
        portToken: { type: "apiKey", in: "header", name: "X-Sandtree-Token" },
        gatewayToken: {
          type: "http",
          scheme: "bearer",
          description: "a Prime gateway token (POST /prime/api/v1/sandbox/{id}/auth)",
        },
      },
    },
    security: [{ bearer: [] }],
    paths,
  };
}
