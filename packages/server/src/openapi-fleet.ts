import {
  CheckpointRecord,
  HeartbeatRequest,
  HeartbeatResponse,
  HostList,
  HostStateChange,
  Placement,
  PlacementRequest,
  PrepareCheckpointRequest,
  PrepareCheckpointResponse,
  RegisterHostRequest,
  RegisterHostResponse,
} from "@sandtree/protocol";
import { z } from "zod";
import { schemaRefs } from "./openapi-parts.js";

// Fleet mode's part of the OpenAPI document (openapi.ts merges it).

export const FLEET_SCHEMAS = {
  RegisterHostRequest,
  RegisterHostResponse,
  HeartbeatRequest,
  HeartbeatResponse,
  HostList,
  HostStateChange,
  PlacementRequest,
  Placement,
  PlacementReleased: z.object({ released: z.boolean() }),
  CheckpointRecord,
  PrepareCheckpointRequest,
  PrepareCheckpointResponse,
};

const { ok } = schemaRefs<keyof typeof FLEET_SCHEMAS>();

export const FLEET_OPERATIONS = {
  "POST /v1/fleet/hosts/register": {
    summary: "A worker joins (Authorization: Bearer <join token>); the answer is the only time its secret is shown",
    body: "RegisterHostRequest",
    responses: { 201: ok("RegisterHostResponse") },
  },
  "POST /v1/fleet/hosts/:id/heartbeat": {
    summary: "A worker's heartbeat (Authorization: Bearer <host secret>), with capacity and locality when they changed",
    body: "HeartbeatRequest",
    responses: { 200: ok("HeartbeatResponse") },
  },
  "GET /v1/hosts": { summary: "List hosts with capacity, usage and state (admin)", responses: { 200: ok("HostList") } },
  "POST /v1/hosts/:name/cordon": { summary: "Cordon a host: no new work (admin)", responses: { 200: ok("HostStateChange") } },
  "POST /v1/hosts/:name/drain": {
    summary: "Drain a host: no new work, its sandboxes stay until they end (admin)",
    responses: { 200: ok("HostStateChange") },
  },
  "POST /v1/hosts/:name/uncordon": { summary: "Let a host take work again (admin)", responses: { 200: ok("HostStateChange") } },
  "POST /v1/fleet/placements": {
    summary: "Decide a host and record a reservation; starts nothing (admin)",
    body: "PlacementRequest",
    responses: { 201: ok("Placement") },
  },
  "DELETE /v1/fleet/placements/:id": { summary: "Release a reservation (admin)", responses: { 200: ok("PlacementReleased") } },
  "GET /v1/fleet/checkpoints/:cid": {
    summary: "On a worker, for its control plane only: the record of a checkpoint it took (layer key, sha256, state)",
    responses: { 200: ok("CheckpointRecord") },
  },
  "POST /v1/fleet/checkpoints/prepare": {
    summary:
      "On a worker, for its control plane only: record a checkpoint chain taken elsewhere and fetch and verify its layers from the object store",
    body: "PrepareCheckpointRequest",
    responses: { 200: ok("PrepareCheckpointResponse") },
  },
} as const;
