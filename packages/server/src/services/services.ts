import type { AdmissionService } from "./admission-service.js";
import type { AuthService } from "./auth-service.js";
import type { BulkService } from "./bulk-service.js";
import type { CheckpointService } from "./checkpoint-service.js";
import type { DesktopService } from "./desktop/desktop-service.js";
import type { DirWatchService } from "./dir-watch-service.js";
import type { ExecService } from "./exec-service.js";
import type { FileService } from "./file-service.js";
import type { FleetService } from "./fleet/fleet-service.js";
import type { RemoteCheckpoints } from "./fleet/remote-checkpoints.js";
import type { RemoteSandboxes } from "./fleet/remote-sandboxes.js";
import type { WorkerCheckpoints } from "./fleet/worker-checkpoints.js";
import type { GatewayTokens } from "./gateway-tokens.js";
import type { ImageAliases } from "./image-aliases.js";
import type { ImageResolver } from "./image-resolver.js";
import type { JobService } from "./job-service.js";
import type { MeteringService } from "./metering/metering-service.js";
import type { MetricsService } from "./metrics-service.js";
import type { NetworkService } from "./network-service.js";
import type { PortService } from "./port-service.js";
import type { ProcessTable } from "./process-table.js";
import type { PtyService } from "./pty-service.js";
import type { RestoreService } from "./restore-service.js";
import type { SandboxService } from "./sandbox-service.js";
import type { SandboxStarts } from "./sandbox-starts.js";
import type { SandboxTokens } from "./sandbox-tokens.js";
import type { TeamService } from "./team-service.js";
import type { TimeoutService } from "./timeout-service.js";
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
  /** Sandboxes on workers: where creates go, and which calls are proxied (routes/worker-proxy.ts). */
  remote: RemoteSandboxes;
  /** Checkpoints, forks' checkpoints and resets of sandboxes on workers (unset: none run there). */
  remoteCheckpoints?: RemoteCheckpoints;
  /** On a fleet worker: its checkpoint records for the control plane, and imports of chains taken elsewhere. */
  workerCheckpoints?: WorkerCheckpoints;
}
