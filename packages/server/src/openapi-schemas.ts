// The schemas of the OpenAPI document and the helpers its operation tables are written with.
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
import { FLEET_SCHEMAS } from "./openapi-fleet.js";
import { VOLUME_SCHEMAS } from "./openapi-volumes.js";

/** Every schema the document names, by name. */
export const schemas = {
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

export type SchemaName = keyof typeof schemas;
export const ref = (name: SchemaName) => ({ $ref: `#/components/schemas/${name}` });
export const json = (name: SchemaName) => ({ content: { "application/json": { schema: ref(name) } } });
export const ok = (name: SchemaName) => ({ description: name, ...json(name) });
export const bytes = { description: "bytes", content: { "application/octet-stream": {} } };
export const none = (description: string) => ({ description });
export const query = (...names: string[]) => names.map((n) => ({ name: n, in: "query", schema: { type: "string" } }));
export const outputQuery = query("stream", "offset", "length");
export const pathQuery = { name: "path", in: "query", required: true, schema: { type: "string" } };

/** What one route takes and answers. */
export interface Operation {
  summary: string;
  body?: SchemaName | "bytes";
  parameters?: object[];
  responses: Record<string, object>;
  /** No API key (or another credential). */
  security?: object[];
}
