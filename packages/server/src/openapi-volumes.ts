import { CreateVolumeRequest, Volume, VolumeList } from "@sandtree/protocol";
import { bytes, pathQuery, query, schemaRefs } from "./openapi-parts.js";

// Volumes' part of the OpenAPI document (openapi.ts merges it): the resource and its files.

export const VOLUME_SCHEMAS = { CreateVolumeRequest, Volume, VolumeList };

/** The file schemas are the main document's (a volume's files answer as a sandbox's). */
const { ok } = schemaRefs<keyof typeof VOLUME_SCHEMAS | "FileStat" | "FileList" | "UploadResult">();

export const VOLUME_OPERATIONS = {
  "POST /v1/volumes": {
    summary: "Create a volume (name unique in the team)",
    body: "CreateVolumeRequest" as const,
    responses: { 201: ok("Volume") },
  },
  "GET /v1/volumes": { summary: "List the team's volumes", responses: { 200: ok("VolumeList") } },
  "GET /v1/volumes/:id": { summary: "Get a volume (by id or name), its bytes measured again", responses: { 200: ok("Volume") } },
  "DELETE /v1/volumes/:id": {
    summary: "Delete a volume and its files (409 VOLUME_IN_USE while a sandbox mounts it)",
    responses: { 204: { description: "deleted" } },
  },
  "GET /v1/volumes/:id/files": {
    summary: "Download a volume's file (or a byte range: offset, length); symlinks, fifos and devices are refused",
    parameters: [pathQuery, ...query("offset", "length")],
    responses: { 200: bytes },
  },
  "PUT /v1/volumes/:id/files": {
    summary: "Upload a file into a volume (streamed; parents are created; 507 VOLUME_FULL past its size, nothing left)",
    parameters: [pathQuery, ...query("mode")],
    body: "bytes" as const,
    responses: { 200: ok("UploadResult") },
  },
  "DELETE /v1/volumes/:id/files": {
    summary: "Remove a file or directory of a volume (a symlink itself, never its target)",
    parameters: [pathQuery, ...query("recursive")],
    responses: { 204: { description: "removed" } },
  },
  "GET /v1/volumes/:id/files/stat": {
    summary: "Stat a path of a volume",
    parameters: [pathQuery],
    responses: { 200: ok("FileStat") },
  },
  "GET /v1/volumes/:id/files/list": {
    summary: "List a directory of a volume",
    parameters: [pathQuery],
    responses: { 200: ok("FileList") },
  },
  "POST /v1/volumes/:id/files/mkdir": {
    summary: "Make a directory in a volume",
    body: "MkdirRequest" as const,
    responses: { 201: ok("FileStat") },
  },
};
