import {
  ApiKey,
  ApiKeyList,
  BatchStatusRequest,
  BatchStatusResult,
  BulkDeleteRequest,
  BulkDeleteResult,
  CreateApiKeyRequest,
  CreatedApiKey,
  CreateSandboxRequest,
  CreateTeamRequest,
  ErrorBody,
  ExecEvent,
  ExecRequest,
  ExecResult,
  ExposedPort,
  ExposedPortList,
  ExposePortRequest,
  FileList,
  FileStat,
  Image,
  ImageList,
  ImportImageRequest,
  Job,
  JobList,
  KillJobRequest,
  MkdirRequest,
  PullImageRequest,
  Sandbox,
  SandboxList,
  SandboxLogs,
  SandboxNetwork,
  SignalRequest,
  StartJobRequest,
  Team,
  TeamLimitsResponse,
  TeamList,
  UpdateNetworkRequest,
  UpdateTeamLimitsRequest,
  UploadResult,
} from "@sandtree/protocol";
import { z } from "zod";

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
};

const ref = (name: keyof typeof schemas) => ({ $ref: `#/components/schemas/${name}` });
const json = (name: keyof typeof schemas) => ({ content: { "application/json": { schema: ref(name) } } });
const errors = { default: { description: "error", ...json("ErrorBody") } };
const idParam = { name: "id", in: "path", required: true, schema: { type: "string" } };
const teamParam = { name: "name", in: "path", required: true, schema: { type: "string" } };
const jobParam = { name: "jobId", in: "path", required: true, schema: { type: "string" } };
const outputQuery = ["stream", "offset", "length"].map((n) => ({ name: n, in: "query", schema: { type: "string" } }));
const pathQuery = { name: "path", in: "query", required: true, schema: { type: "string" } };

let cached: object | null = null;

/** OpenAPI 3.1 built from the same zod schemas the server validates with. */
export function openApiDocument(): object {
  if (cached) return cached;
  const components = Object.fromEntries(
    Object.entries(schemas).map(([k, s]) => [k, z.toJSONSchema(s as z.ZodType, { io: "input", unrepresentable: "any" })]),
  );
  cached = {
    openapi: "3.1.0",
    info: { title: "sandtree", version: "0.1.0" },
    components: { schemas: components, securitySchemes: { bearer: { type: "http", scheme: "bearer" } } },
    security: [{ bearer: [] }],
    paths: {
      "/v1/sandboxes": {
        post: {
          summary: "Create a sandbox",
          requestBody: json("CreateSandboxRequest"),
          responses: { 201: json("Sandbox"), 200: { description: "idempotency_key replay", ...json("Sandbox") }, ...errors },
        },
        get: {
          summary: "List sandboxes",
          parameters: ["status", "label", "limit", "cursor"].map((n) => ({ name: n, in: "query", schema: { type: "string" } })),
          responses: { 200: json("SandboxList"), ...errors },
        },
      },
      "/v1/sandboxes/{id}": {
        get: { parameters: [idParam], responses: { 200: json("Sandbox"), ...errors } },
        delete: { parameters: [idParam], responses: { 200: json("Sandbox"), ...errors } },
      },
      "/v1/sandboxes/{id}/logs": { get: { parameters: [idParam], responses: { 200: json("SandboxLogs"), ...errors } } },
      "/v1/sandboxes/{id}/exec": {
        post: {
          summary: "Run a command: buffered JSON, or streamed with Accept application/x-ndjson or text/event-stream",
          parameters: [idParam],
          requestBody: json("ExecRequest"),
          responses: {
            200: {
              description: "ExecResult, or a stream of ExecEvent",
              content: {
                "application/json": { schema: ref("ExecResult") },
                "application/x-ndjson": { schema: ref("ExecEvent") },
                "text/event-stream": { schema: ref("ExecEvent") },
              },
            },
            ...errors,
          },
        },
      },
      "/v1/sandboxes/{id}/execs/{execId}/signal": {
        post: {
          parameters: [idParam, { name: "execId", in: "path", required: true, schema: { type: "string" } }],
          requestBody: json("SignalRequest"),
          responses: { 204: { description: "sent" }, ...errors },
        },
      },
      "/v1/sandboxes/{id}/execs/{execId}/stdin": {
        post: {
          parameters: [idParam, { name: "execId", in: "path", required: true, schema: { type: "string" } }],
          responses: { 204: { description: "written" }, ...errors },
        },
      },
      "/v1/sandboxes/{id}/files": {
        get: {
          parameters: [idParam, pathQuery],
          responses: { 200: { description: "file bytes", content: { "application/octet-stream": {} } }, ...errors },
        },
        put: {
          parameters: [idParam, pathQuery],
          requestBody: { content: { "application/octet-stream": {} } },
          responses: { 200: json("UploadResult"), ...errors },
        },
        delete: { parameters: [idParam, pathQuery], responses: { 204: { description: "removed" }, ...errors } },
      },
      "/v1/sandboxes/{id}/files/stat": {
        get: { parameters: [idParam, pathQuery], responses: { 200: json("FileStat"), ...errors } },
      },
      "/v1/sandboxes/{id}/files/list": {
        get: { parameters: [idParam, pathQuery], responses: { 200: json("FileList"), ...errors } },
      },
      "/v1/sandboxes/{id}/files/mkdir": {
        post: { parameters: [idParam], requestBody: json("MkdirRequest"), responses: { 201: json("FileStat"), ...errors } },
      },
      "/v1/teams": {
        post: {
          summary: "Create a team (admin)",
          requestBody: json("CreateTeamRequest"),
          responses: { 201: json("Team"), ...errors },
        },
        get: { summary: "List teams (admin)", responses: { 200: json("TeamList"), ...errors } },
      },
      "/v1/teams/{name}/limits": {
        get: { parameters: [teamParam], responses: { 200: json("TeamLimitsResponse"), ...errors } },
        put: {
          summary: "Change a team's limits (admin); null restores a default",
          parameters: [teamParam],
          requestBody: json("UpdateTeamLimitsRequest"),
          responses: { 200: json("TeamLimitsResponse"), ...errors },
        },
      },
      "/v1/keys": {
        post: {
          summary: "Create an API key (admin); the answer is the only time the key is shown",
          requestBody: json("CreateApiKeyRequest"),
          responses: { 201: json("CreatedApiKey"), ...errors },
        },
        get: { summary: "List API keys (admin)", responses: { 200: json("ApiKeyList"), ...errors } },
      },
      "/v1/keys/{id}": {
        delete: { summary: "Revoke an API key (admin)", parameters: [idParam], responses: { 200: json("ApiKey"), ...errors } },
      },
      "/v1/sandboxes/bulk-delete": {
        post: { requestBody: json("BulkDeleteRequest"), responses: { 200: json("BulkDeleteResult"), ...errors } },
      },
      "/v1/sandboxes/batch-status": {
        post: { requestBody: json("BatchStatusRequest"), responses: { 200: json("BatchStatusResult"), ...errors } },
      },
      "/v1/sandboxes/{id}/execs/{execId}/output": {
        get: {
          summary: "A byte range of a buffered exec's whole stdout or stderr",
          parameters: [idParam, { name: "execId", in: "path", required: true, schema: { type: "string" } }, ...outputQuery],
          responses: { 200: { description: "bytes", content: { "application/octet-stream": {} } }, ...errors },
        },
      },
      "/v1/sandboxes/{id}/jobs": {
        post: { parameters: [idParam], requestBody: json("StartJobRequest"), responses: { 201: json("Job"), ...errors } },
        get: { parameters: [idParam], responses: { 200: json("JobList"), ...errors } },
      },
      "/v1/sandboxes/{id}/jobs/{jobId}": {
        get: { parameters: [idParam, jobParam], responses: { 200: json("Job"), ...errors } },
      },
      "/v1/sandboxes/{id}/jobs/{jobId}/output": {
        get: {
          parameters: [idParam, jobParam, ...outputQuery],
          responses: { 200: { description: "bytes", content: { "application/octet-stream": {} } }, ...errors },
        },
      },
      "/v1/sandboxes/{id}/jobs/{jobId}/kill": {
        post: {
          parameters: [idParam, jobParam],
          requestBody: json("KillJobRequest"),
          responses: { 200: json("Job"), ...errors },
        },
      },
      "/v1/images": { get: { responses: { 200: json("ImageList"), ...errors } } },
      "/v1/images/import": {
        post: { requestBody: json("ImportImageRequest"), responses: { 200: json("Image"), ...errors } },
      },
      "/v1/images/pull": { post: { requestBody: json("PullImageRequest"), responses: { 200: json("Image"), ...errors } } },
      "/v1/sandboxes/{id}/network": {
        get: {
          summary: "The sandbox's address, egress policy, tunnels and whether the policy is applied",
          parameters: [idParam],
          responses: { 200: json("SandboxNetwork"), ...errors },
        },
        put: {
          summary: "Replace the egress policy of a running sandbox (a list, or {} for the server's default)",
          parameters: [idParam],
          requestBody: json("UpdateNetworkRequest"),
          responses: { 200: json("SandboxNetwork"), ...errors },
        },
      },
      "/v1/sandboxes/{id}/ports": {
        post: {
          summary: "Expose a port (again: rotate its token); the answer is the only time the token is shown",
          parameters: [idParam],
          requestBody: json("ExposePortRequest"),
          responses: { 201: json("ExposedPort"), ...errors },
        },
        get: {
          summary: "Exposed ports (no tokens)",
          parameters: [idParam],
          responses: { 200: json("ExposedPortList"), ...errors },
        },
      },
      "/v1/sandboxes/{id}/ports/{port}": {
        delete: {
          parameters: [idParam, { name: "port", in: "path", required: true, schema: { type: "integer" } }],
          responses: { 204: { description: "no longer exposed" }, ...errors },
        },
      },
    },
  };
  return cached;
}
