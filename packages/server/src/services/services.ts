import type { CheckpointService } from "./checkpoints/checkpoint-service.js";
import type { CheckpointSites } from "./checkpoints/checkpoint-site.js";
import type { ExecService } from "./commands/exec-service.js";
import type { JobService } from "./commands/job-service.js";
import type { ProcessTable } from "./commands/process-table.js";
import type { PtyService } from "./commands/pty-service.js";
import type { DesktopService } from "./desktop/desktop-service.js";
import type { DirWatchService } from "./files/dir-watch-service.js";
import type { FileService } from "./files/file-service.js";
import type { FleetService } from "./fleet/fleet-service.js";
import type { RemoteSandboxes } from "./fleet/remote-sandboxes.js";
import type { WorkerCheckpoints } from "./fleet/worker-checkpoints.js";
import type { ImageAliases } from "./images/image-aliases.js";
import type { ImageResolver } from "./images/image-resolver.js";
import type { MeteringService } from "./metering/metering-service.js";
import type { GatewayTokens } from "./network/gateway-tokens.js";
import type { NetworkService } from "./network/network-service.js";
import type { PortService } from "./network/port-service.js";
import type { MetricsService } from "./observability/metrics-service.js";
import type { AdmissionService } from "./sandboxes/admission-service.js";
import type { BulkService } from "./sandboxes/bulk-service.js";
import type { RestoreService } from "./sandboxes/restore-service.js";
import type { SandboxService } from "./sandboxes/sandbox-service.js";
import type { SandboxStarts } from "./sandboxes/sandbox-starts.js";
import type { SandboxTokens } from "./sandboxes/sandbox-tokens.js";
import type { TimeoutService } from "./sandboxes/timeout-service.js";
import type { AuthService } from "./teams/auth-service.js";
import type { TeamService } from "./teams/team-service.js";
import type { VolumeService } from "./volumes/volume-service.js";

export interface Services {
  auth: AuthService;
  sandboxes: SandboxService;
  checkpoints: CheckpointService;
  /** Create from a checkpoint, fork, reset. */
  restores: RestoreService;
  exec: ExecService;
  files: FileService;
  /** Volumes, their directories on this host and their file API. */
  volumes: VolumeService;
  images: ImageResolver;
  /** The admin-set image alias table (creates and pulls go through it). */
  aliases: ImageAliases;
  teams: TeamService;
  admission: AdmissionService;
  timeouts: TimeoutService;
  jobs: JobService;
  pty: PtyService;
  /** Processes that outlive their request, attached to by pid or tag (the E2B daemon's model). */
  processes: ProcessTable;
  /** Directory watches (polled). */
  dirWatch: DirWatchService;
  /** Starts in flight, to wait for one to run. */
  starts: SandboxStarts;
  /** Per-sandbox access tokens (the E2B daemon routes). */
  sandboxTokens: SandboxTokens;
  bulk: BulkService;
  network: NetworkService;
  ports: PortService;
  /** Short-lived tokens for one sandbox (the Prime gateway's). */
  gatewayTokens: GatewayTokens;
  metering: MeteringService;
  metrics: MetricsService;
  desktop: DesktopService;
  /** Fleet hosts, heartbeats, placement, the HOST_LOST reaper. */
  fleet: FleetService;
  /** Where creates go on the fleet: this host or a worker (its bundle runs the sandbox). */
  remote: RemoteSandboxes;
  /** Where a sandbox's checkpoints are taken: the bundle of the host it runs on. */
  checkpointSites: CheckpointSites;
  /** On a fleet worker: its checkpoint records for the control plane, and imports of chains taken elsewhere. */
  workerCheckpoints?: WorkerCheckpoints;
}
