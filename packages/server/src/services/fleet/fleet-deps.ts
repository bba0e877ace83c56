import type { BlobStoreSetting } from "../../blob-store-config.js";
import type { HostStore } from "../../store/host-store.js";
import type { HostUrls } from "../../store/host-urls.js";
import type { Clock } from "../metering/clock.js";
import type { Logger } from "../observability/logger.js";
import type { FleetEvents } from "./fleet-events.js";
import type { JoinToken } from "./join-token.js";

export interface FleetServiceDeps {
  hosts: HostStore;
  dataDir: string;
  log: Logger;
  clock: Clock;
  /** How often workers are told to heartbeat. */
  heartbeatIntervalMs: number;
  /** A host silent this long becomes LOST; hosts later than this take no new work. */
  hostLostAfterMs: number;
  /** Where workers' sandbox APIs are (absent: no host runs sandboxes but this control plane's own). */
  urls?: HostUrls;
  /**
   * The name of this control plane's own host: `local` (the default) with a store of its own;
   * `local-<id>` (localHostName()) when several control planes share the store.
   */
  localHostName?: string;
  /** This control plane's blob store (unset: a local directory); workers are told an S3 one's URL. */
  blobStore?: BlobStoreSetting | undefined;
  /** Where the fleet tells what follows it: a worker joined, a host lost (with its sandboxes), a reaping done. */
  events: FleetEvents;
  /** The join token, already loaded (absent: loaded or created from the data dir here). */
  joinToken?: JoinToken;
}
