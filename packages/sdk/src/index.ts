export type {
  ApiKey,
  BatchStatusResult,
  BulkDeleteRequest,
  BulkDeleteResult,
  Checkpoint,
  CreatedApiKey,
  CreateSandboxRequest,
  DesktopActionInput,
  DesktopEvent,
  DesktopInfo,
  DesktopReplayReport,
  DesktopReplayRequest,
  DesktopVnc,
  DesktopWindow,
  ExecResult,
  ExposedPort,
  FileList,
  FileStat,
  Image,
  Job,
  JobList,
  JobStatus,
  Sandbox,
  SandboxList,
  SandboxLogs,
  SandboxNetwork,
  SandboxStatus,
  ServerVersion,
  Team,
  TeamLimits,
  TeamLimitsResponse,
  UpdateNetworkRequest,
  UploadResult,
  Volume,
  VolumeMount,
} from "@sandtree/protocol";
export type { ForkOptions, WaitForCheckpointOptions } from "./checkpoints.js";
export { CheckpointFailedError, Checkpoints } from "./checkpoints.js";
export type { ResolvedConfig, SandtreeClientOptions } from "./client.js";
export { DEFAULT_API_URL, DEFAULT_TIMEOUT_MS, resolveConfig, SandtreeClient } from "./client.js";
export { Desktop } from "./desktop.js";
export * from "./errors.js";
export type { ExecExit, ExecOutputEvent, ExecSignal } from "./exec-handle.js";
export { DEFAULT_MAX_BUFFERED_BYTES, ExecHandle } from "./exec-handle.js";
export type { MkdirOptions, ReadOptions, RemoveOptions, TransferOptions, UploadOptions, WriteOptions } from "./files.js";
export { Files } from "./files.js";
export { Hosts } from "./hosts.js";
export type { RequestOptions } from "./http.js";
export type { PullImageOptions } from "./images.js";
export { Images } from "./images.js";
export type { FollowOptions, OutputOptions, StartJobOptions } from "./jobs.js";
export { Jobs } from "./jobs.js";
export { Keys } from "./keys.js";
export { NdjsonDecoder } from "./ndjson.js";
export type { PortForwardOptions } from "./ports.js";
export { PortForward } from "./ports.js";
export type { PtyExit, PtyOptions, PtySignal } from "./pty-handle.js";
export { PtyHandle } from "./pty-handle.js";
export type { RetryOptions } from "./retry.js";
export { DEFAULT_RETRY } from "./retry.js";
export type {
  CreateSandboxInput,
  ExecCommand,
  ExecOptions,
  ListSandboxesOptions,
  LogsOptions,
  StreamExecOptions,
  WaitForCreationOptions,
} from "./sandboxes.js";
export { Sandboxes } from "./sandboxes.js";
export { Teams } from "./teams.js";
export { Usage } from "./usage.js";
export { VERSION } from "./version.js";
export { Volumes } from "./volumes.js";
