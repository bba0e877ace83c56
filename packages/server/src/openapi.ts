import {
  CreateSandboxRequest,
  ErrorBody,
  ExecEvent,
  ExecRequest,
  ExecResult,
  FileList,
  FileStat,
  Image,
  ImageList,
  ImportImageRequest,
  MkdirRequest,
  PullImageRequest,
  Sandbox,
  SandboxList,
  SandboxLogs,
  SignalRequest,
  UploadResult,
} from "@sandtree/protocol";
import { z } from "zod";

const schemas = {
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
};

const ref = (name: keyof typeof schemas) => ({ $ref: `#/components/schemas/${name}` });
const json = (name: keyof typeof schemas) => ({ content: { "application/json": { schema: ref(name) } } });
const errors = { default: { description: "error", ...json("ErrorBody") } };
const idParam = { name: "id", in: "path", required: true, schema: { type: "string" } };
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
          responses: { 201: json("Sandbox"), ...errors },
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
      "/v1/images": { get: { responses: { 200: json("ImageList"), ...errors } } },
      "/v1/images/import": {
        post: { requestBody: json("ImportImageRequest"), responses: { 200: json("Image"), ...errors } },
      },
      "/v1/images/pull": { post: { requestBody: json("PullImageRequest"), responses: { 200: json("Image"), ...errors } } },
    },
  };
  return cached;
}
