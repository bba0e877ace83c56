import type { Foundation } from "./server-foundation.js";
import type { Runtime } from "./server-runtime.js";
import { ExecService } from "./services/commands/exec-service.js";
import { JobService } from "./services/commands/job-service.js";
import { ProcessTable } from "./services/commands/process-table.js";
import { PtyService } from "./services/commands/pty-service.js";
import { DesktopService } from "./services/desktop/desktop-service.js";
import { DirWatchService } from "./services/files/dir-watch-service.js";
import { FileService } from "./services/files/file-service.js";
import { workerSides } from "./services/fleet/worker-sides.js";
import { GatewayTokens } from "./services/network/gateway-tokens.js";
import { PortService } from "./services/network/port-service.js";
import { MetricsService } from "./services/observability/metrics-service.js";
import { BulkService } from "./services/sandboxes/bulk-service.js";
import { RestoreService } from "./services/sandboxes/restore-service.js";
import { SandboxStarts } from "./services/sandboxes/sandbox-starts.js";
import { SandboxTokens } from "./services/sandboxes/sandbox-tokens.js";
import type { Services } from "./services/services.js";
import { TeamService } from "./services/teams/team-service.js";
import { openVolumeStore } from "./store/open-store.js";

/** The services the routes call, over the runtime; each subscribes to the sandboxes' events it needs. */
export function composeServices(f: Foundation, r: Runtime): Services {
  const { store, admission, log, serverKey, metering } = f;
  const { sandboxes, checkpoints, network, volumes, images } = r;
  const exec = new ExecService(sandboxes);
  const files = new FileService(sandboxes);
  return {
    auth: f.auth,
    sandboxes,
    checkpoints,
    restores: new RestoreService({
      sandboxes,
      checkpoints,
      admission,
      network,
      store,
      images,
      accel: f.accel,
      volumes,
      checkpointSites: r.checkpointSites,
    }),
    exec,
    files,
    volumes,
    images,
    aliases: r.aliases,
    teams: new TeamService(store, f.auth, admission, (teamId) => openVolumeStore(store).volumeUsage(teamId)),
    admission,
    timeouts: r.timeouts,
    jobs: new JobService(store, sandboxes),
    pty: new PtyService(sandboxes),
    processes: new ProcessTable(sandboxes),
    dirWatch: new DirWatchService(files, sandboxes),
    sandboxTokens: new SandboxTokens(serverKey, store),
    starts: new SandboxStarts(sandboxes),
    bulk: new BulkService(store, sandboxes, log),
    network,
    ports: new PortService(store, sandboxes, {
      hasNetwork: (id) => sandboxes.hasNetwork(id),
      // A sandbox being reconnected after a restart is waited for, as calls under /v1/sandboxes/:id are.
      connect: async (sb, port, opts) => {
        await sandboxes.whenAdopted(sb.id);
        return (await sandboxes.running(sb.team_id, sb.id)).connect(port, opts);
      },
    }),
    gatewayTokens: new GatewayTokens(serverKey, store),
    metering,
    metrics: new MetricsService(store, admission, metering),
    desktop: new DesktopService({ sandboxes, exec, files, log }),
    fleet: r.fleet,
    remote: r.remote,
    checkpointSites: r.checkpointSites,
    ...(f.workerTeamId
      ? workerSides({
          store,
          blobs: f.blobs,
          images,
          teamId: f.workerTeamId,
          disks: sandboxes.bundles.local.host,
        })
      : {}),
  };
}
