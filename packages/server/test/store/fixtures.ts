import { randomBytes } from "node:crypto";
import type { Sandbox } from "@sandtree/protocol";
import { wholeSandbox } from "../../../sdk/test/fake-server.js";
import { type CheckpointRow, type JobRow, type NetworkRow, runningJobRow, type TeamRow } from "../../src/store/rows.js";
import type { Store } from "../../src/store/store.js";

/** A store under test and how to restart it; built afresh for every test. */
export interface OpenedStore {
  store: Store;
  /**
   * Other stores on the same data, opened together with `store` (all at once, on the empty
   * data): the stores of several servers sharing one database. Empty unless asked for.
   */
  peers: Store[];
  /** The names the data's migration table records, one row each (read apart from the stores). */
  migrations(): Promise<string[]>;
  /** Closes the store and opens another on the same data (a server restart); answers the new one. */
  reopen(): Promise<Store>;
  /** Closes whatever stores are open and removes their data. */
  destroy(): Promise<void>;
}

export type StoreFactory = (opts?: { peers?: number }) => Promise<OpenedStore>;

/** What every case reads: the store of the running test (replaced by `reopen`), and the factory. */
export interface StoreContext {
  store: Store;
  opened: OpenedStore;
  make: StoreFactory;
}

/** A fixed "now" for everything dated by the test (creation times, meter clocks). */
export const NOW = Date.parse("2026-06-01T12:00:00.000Z");
export const iso = (ms: number) => new Date(ms).toISOString();
/** Long before NOW: a timestamp the store must bump when it writes. */
export const LONG_AGO = "2020-01-01T00:00:00.000Z";

const hex = (n: number) => randomBytes(n).toString("hex");

/** Runs a store call that must fail, whether it throws (a synchronous store) or rejects (an async one). */
export function attempt<T>(call: () => T | Promise<T>): Promise<T> {
  return (async () => call())();
}

export function sandboxRow(teamId: string, over: Partial<Sandbox> = {}): Sandbox {
  return wholeSandbox({
    id: `sb-${hex(8)}`,
    team_id: teamId,
    image: "sandtree/busybox",
    created_at: iso(NOW),
    updated_at: LONG_AGO,
    ...over,
  });
}

/** Two teams: "alpha", the one a case works in, and "beta", another whose rows it must never see. */
/** A sandbox admitted (PENDING) in `teamId`'s name, as a create records it: 1 vCPU, 1 GB, 1 GB of disk. */
export async function admitted(s: Store, teamId: string, over: Partial<Sandbox> = {}): Promise<Sandbox> {
  const { sandbox } = await s.admitSandbox({
    sandbox: sandboxRow(teamId, { cpu_cores: 1, memory_gb: 1, disk_size_gb: 1, ...over }),
    sealedSecrets: null,
    idempotency: null,
    nowMs: Date.now(),
    check: () => {},
  });
  return sandbox;
}

export async function twoTeams(s: Store): Promise<{ team: TeamRow; other: TeamRow }> {
  const team = await s.createTeam("alpha");
  return { team, other: await s.createTeam("beta") };
}

/** Two teams, and two RUNNING sandboxes of the first. */
export async function twoTeamsTwoRunning(s: Store): Promise<{ team: TeamRow; other: TeamRow; sb: Sandbox; sb2: Sandbox }> {
  const teams = await twoTeams(s);
  const sb = await addSandbox(s, teams.team.id, { status: "RUNNING" });
  return { ...teams, sb, sb2: await addSandbox(s, teams.team.id, { status: "RUNNING" }) };
}

/** Inserts a sandbox row (insertSandbox, as tests and imports do) and answers it. */
export async function addSandbox(s: Store, teamId: string, over: Partial<Sandbox> = {}): Promise<Sandbox> {
  const sb = sandboxRow(teamId, over);
  await s.insertSandbox(sb);
  return sb;
}

export function checkpointRow(teamId: string, sandboxId: string, over: Partial<CheckpointRow> = {}): CheckpointRow {
  const id = `ck-${hex(8)}`;
  return {
    id,
    team_id: teamId,
    sandbox_id: sandboxId,
    parent_id: null,
    state: "PENDING",
    depth: 0,
    image: "sandtree/busybox",
    image_digest: "sha256:abc",
    base: `sha256:${"b".repeat(64)}`,
    disk_size_bytes: 4 * 1024 ** 3,
    stored_bytes: 0,
    sha256: null,
    blob_key: null,
    error: null,
    created_at: iso(NOW),
    updated_at: LONG_AGO,
    expires_at: null,
    mem_key: null,
    mem_sha256: null,
    cpu_cores: null,
    memory_mb: null,
    machine: null,
    ...over,
  };
}

export function jobRow(teamId: string, sandboxId: string, over: Partial<JobRow> = {}): JobRow {
  return {
    ...runningJobRow({
      id: `job-${hex(6)}`,
      team_id: teamId,
      sandbox_id: sandboxId,
      command: "sleep 1",
      wrapper_pid: 42,
      started_at: iso(NOW),
    }),
    ...over,
  };
}

export function networkRow(sandboxId: string, over: Partial<NetworkRow> = {}): NetworkRow {
  return {
    sandbox_id: sandboxId,
    enabled: true,
    slot: null,
    mode: "allowlist",
    allowlist: ["example.com", "10.0.0.0/8"],
    denylist: [],
    tunnels: { db: "127.0.0.1:5432" },
    generation: 1,
    applied: false,
    updated_at: iso(NOW),
    ...over,
  };
}
