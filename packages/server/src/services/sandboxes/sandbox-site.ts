import type { CreateSandboxParams, Sandbox } from "@sandtree/protocol";
import type { RestorePlan } from "../fleet/restore-plan.js";
import type { RestoreLayers } from "./provisioner.js";

/** A sandbox coming up: how it starts, and a promise that settles once it is RUNNING or failed. */
export interface SandboxStart {
  sandbox: Sandbox;
  /** The create's parameters (absent for a reset). */
  params?: CreateSandboxParams;
  /** "none": a fresh disk; "disk": a checkpoint's disk, booted; "memory": resumed with its processes. */
  restored: "none" | "disk" | "memory";
  ready: Promise<void>;
}

/**
 * Where a sandbox runs: this host (its provisioner, its networks, the services that set up a
 * guest) or a fleet worker (started there, followed here). Placement answers one; the sandbox
 * service never asks which it is. The steps of a create come in their order by their types:
 * `verify` (inside placement, before admission), then `admitted`, whose answer starts it.
 */
export interface SandboxSite {
  /** A restore's layers checked where the sandbox will run (before its admission). */
  verify(plan: RestorePlan): Promise<RestoreLayers>;
  /** What the site sets up for an admitted sandbox before its start (this host: its network's address and rules). */
  admitted(sb: Sandbox, params: CreateSandboxParams): Promise<SiteStart>;
  /** Pauses or resumes a team's sandbox that runs there (the record here follows). */
  control(teamId: string, id: string, action: "pause" | "resume"): Promise<void>;
}

/** An admitted sandbox's start on its site. */
export interface SiteStart {
  /** Starts it; settles once it is RUNNING or failed (the row moved along either way). */
  start(
    credentials: CreateSandboxParams["registry_credentials"],
    restore: RestoreLayers | null,
    signal: AbortSignal,
  ): Promise<void>;
  /** The start under way: the services that set something up in a guest they reach (this host's start hooks). */
  starting(start: SandboxStart): void;
}

/** What placement hands the create: where it runs, the admission's answer and the restore's layers verified there. */
export interface Placed<T> {
  site: SandboxSite;
  admitted: T;
  /** The restore's layers as verified on the site (null: a fresh disk). */
  restore: RestoreLayers | null;
}

/**
 * Where sandboxes run, chosen once at composition: it places a create (before its admission: a
 * refused or replayed create gives the reservation back), knows which sandboxes live elsewhere
 * after a restart, and ends a sandbox at its site when it ends here.
 */
export interface Placement {
  placeAndAdmit<T extends { created: boolean }>(
    sb: Sandbox,
    params: CreateSandboxParams,
    admit: () => Promise<T>,
    given: RestoreLayers | RestorePlan | null,
  ): Promise<Placed<T>>;
  /** The site of a team's sandbox (another team's, or none: this host's, which answers 404). */
  siteOf(teamId: string, id: string): Promise<SandboxSite>;
  /** The sandboxes whose machines run on other hosts (a restart here does not look for them). */
  elsewhere(): Promise<Set<string>>;
  /** A sandbox that ended here ends at its site too (nothing to do for one on this host). */
  teardown(id: string): Promise<void>;
}

/** The sites of the hosts that joined (workers' remote hosts), by their names in the fleet's registry. */
export interface HostSites {
  on(hostName: string): SandboxSite | undefined;
}

/** A placement built around the site of this host and those of the hosts that joined (the sandbox service makes them). */
export type PlacementFactory = (here: SandboxSite, hosts: HostSites) => Placement;
