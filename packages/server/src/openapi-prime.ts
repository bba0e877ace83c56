// The Prime Sandboxes wire API's part of the OpenAPI document (openapi.ts merges it): routes that
// translate the `prime_sandboxes` client's calls onto sandtree's (docs/prime.md). Their bodies
// are Prime's (see that client's models), so they are described in words here.

import { CommandSession } from "./gen/command_session/command_session_pb.js";
import { none } from "./openapi-parts.js";

const P = "/prime/api/v1/sandbox";
const G = "/prime/gateway/:ns/:sid";
const gatewayAuth = [{ gatewayToken: [] }];

export const PRIME_OPERATIONS = {
  [`POST ${P}`]: {
    summary: "Prime: create a sandbox (snake_case request, camelCase Sandbox answer)",
    responses: { 201: none("Sandbox") },
  },
  [`GET ${P}`]: {
    summary: "Prime: list sandboxes (page, per_page, status, labels, is_active)",
    responses: { 200: none("SandboxListResponse") },
  },
  [`DELETE ${P}`]: {
    summary: "Prime: bulk delete by sandbox_ids or labels (JSON body)",
    responses: { 200: none("BulkDeleteSandboxResponse") },
  },
  [`POST ${P}/status::batchGet`]: {
    summary: "Prime: lifecycle status of up to 100 sandboxes",
    responses: { 200: none("BatchSandboxStatusResponse") },
  },
  [`POST ${P}/background-jobs/status::batchGet`]: {
    summary: "Prime: completion of up to 100 background jobs (the client's nohup wrappers)",
    responses: { 200: none("BatchBackgroundJobStatusResponse") },
  },
  [`POST ${P}/checkpoints::batchGet`]: {
    summary: "Prime: up to 100 checkpoints by id",
    responses: { 200: none("BatchCheckpointResponse") },
  },
  [`GET ${P}/checkpoints/:cid`]: { summary: "Prime: a checkpoint", responses: { 200: none("SandboxCheckpoint") } },
  [`DELETE ${P}/checkpoints/:cid`]: { summary: "Prime: delete a checkpoint", responses: { 200: none("SandboxCheckpoint") } },
  [`GET ${P}/:id`]: { summary: "Prime: a sandbox", responses: { 200: none("Sandbox") } },
  [`DELETE ${P}/:id`]: { summary: "Prime: delete a sandbox", responses: { 200: none("Sandbox") } },
  [`POST ${P}/:id/auth`]: {
    summary: "Prime: a gateway URL and a short-lived token for this sandbox (commands and files go there)",
    responses: { 200: none("{gateway_url, user_ns, job_id, token, expires_at}") },
  },
  [`GET ${P}/:id/logs`]: { summary: "Prime: the sandbox's console and events as text", responses: { 200: none("{logs}") } },
  [`GET ${P}/:id/error-context`]: {
    summary: "Prime: status, errorType, errorMessage",
    responses: { 200: none("{status, errorType, errorMessage}") },
  },
  [`GET ${P}/:id/egress-policy`]: {
    summary: "Prime: the egress policy (sandtree's network policy)",
    responses: { 200: none("EgressPolicyStatus") },
  },
  [`PUT ${P}/:id/egress-policy`]: {
    summary: "Prime: replace the egress policy of a running sandbox",
    responses: { 200: none("EgressPolicyStatus") },
  },
  [`POST ${P}/:id/checkpoints`]: {
    summary: "Prime: take a filesystem checkpoint",
    responses: { 201: none("SandboxCheckpoint") },
  },
  [`GET ${P}/:id/checkpoints`]: {
    summary: "Prime: the sandbox's checkpoints, oldest first",
    responses: { 200: none("{checkpoints}") },
  },
  [`DELETE ${P}/:id/checkpoints`]: {
    summary: "Prime: delete every checkpoint of the sandbox",
    responses: { 200: none("{deleted, errors}") },
  },
  [`POST ${G}/exec`]: {
    summary: "Prime gateway: run a command under sh -c (clients before 0.5); 408 past its timeout",
    security: gatewayAuth,
    responses: { 200: none("{stdout, stderr, exit_code}") },
  },
  [`POST ${G}/upload`]: {
    summary: "Prime gateway: upload a file (multipart, part `file`; ?path=), missing directories made",
    security: gatewayAuth,
    responses: { 200: none("{success, path, size, timestamp}") },
  },
  [`GET ${G}/download`]: {
    summary: "Prime gateway: download a file (?path=)",
    security: gatewayAuth,
    responses: { 200: none("bytes") },
  },
  [`GET ${G}/read-file`]: {
    summary: "Prime gateway: read a file as text (?path=, offset (negative: from the end), length)",
    security: gatewayAuth,
    responses: { 200: none("{content, size, total_size, offset, truncated}") },
  },
  ...Object.fromEntries(
    CommandSession.methods.map((m) => [
      `POST ${G}/${CommandSession.typeName}/${m.name}`,
      {
        summary: `Prime gateway: command session ${m.name} (Connect-RPC, binary protobuf; ${m.methodKind})`,
        security: gatewayAuth,
        responses: { 200: none("application/proto, application/connect+proto") },
      },
    ]),
  ),
};
