import { bytes, none, outputQuery, pathQuery, query } from "./openapi-parts.js";
import { json, type Operation, ok, ref } from "./openapi-schemas.js";

// The sandbox API's operations: lifecycle, commands and jobs, files, checkpoints, fork and reset.

export const SANDBOX_OPERATIONS: Record<string, Operation> = {
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
};
