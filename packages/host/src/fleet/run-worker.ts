import { mkdirSync } from "node:fs";
import path from "node:path";
import type { AccelChoice, RegisterHostResponse, SandboxReport } from "@sandtree/protocol";
import { ImageStore } from "../images/image-store.js";
import { cacheDir, defaultDataDir } from "../paths.js";
import { detectAccel } from "../vmm/accel.js";
import { machineCapacity } from "./capacity.js";
import { WorkerAgent } from "./worker-agent.js";

export interface RunWorkerOptions {
  /** The control planes' URLs: one, or several sharing one database (failed over in order). */
  joinUrls: readonly string[];
  joinToken: string;
  name: string;
  /** Default: the server's data dir (~/.local/share/sandtree). */
  dataDir?: string;
  /** Default: ~/.cache/sandtree (its images are reported). */
  cacheDir?: string;
  accel?: AccelChoice;
  /** vCPUs offered to placements (default: this machine's CPUs; more overcommits them). */
  vcpus?: number;
  version?: string;
  /** Where the control plane reaches this worker's sandbox API (absent: it runs nothing). */
  url?: string;
  /** Status changes of this host's sandboxes, sent with each heartbeat. */
  reports?: { take(): SandboxReport[]; putBack(r: SandboxReport[]): void };
  /** The sandboxes it runs, sent now and then; `end` stops those the control plane has ended. */
  inventory?: { running(): Promise<string[]>; end(ids: string[]): Promise<void> };
  /** Told of every registration: the host id and its new secret. */
  onRegistered?: (r: RegisterHostResponse) => void;
  /** This worker's own blob-store setting, sent at join for the control plane to check against its own. */
  blobStore?: string;
  /** The checkpoint layers this host holds (their blob keys), reported as locality. */
  layers?: () => Promise<string[]>;
  log?: (line: string) => void;
}

/**
 * `sandtree worker`: joins the control plane with this machine's real capacity (CPUs, memory,
 * free disk of the data dir, the accelerator by trial) and the images in its cache, then
 * heartbeats until stopped. With `url` it also runs sandboxes: the server package's
 * startFleetWorker serves them there and gives the control plane a key on each registration.
 */
export async function runWorker(o: RunWorkerOptions): Promise<{ agent: WorkerAgent; joined: RegisterHostResponse }> {
  const dataDir = o.dataDir ?? defaultDataDir();
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const accel = await detectAccel(o.accel ?? "auto");
  const images = new ImageStore({ root: path.join(o.cacheDir ?? cacheDir(), "images") });
  const agent = new WorkerAgent({
    joinUrls: o.joinUrls,
    joinToken: o.joinToken,
    name: o.name,
    capacity: () => {
      const c = machineCapacity(dataDir, accel);
      return o.vcpus ? { ...c, vcpus: o.vcpus } : c;
    },
    locality: async () => ({
      images: [...new Set((await images.list().catch(() => [])).map((i) => i.digest))].sort(),
      templates: [],
      layers: o.layers ? (await o.layers().catch(() => [])).sort() : [],
    }),
    ...(o.version ? { version: o.version } : {}),
    ...(o.url ? { url: o.url } : {}),
    ...(o.blobStore ? { blobStore: o.blobStore } : {}),
    ...(o.onRegistered ? { onRegistered: o.onRegistered } : {}),
    ...(o.reports ? { reports: o.reports } : {}),
    ...(o.inventory ? { inventory: o.inventory } : {}),
    ...(o.log ? { log: o.log } : {}),
  });
  const joined = await agent.start();
  return { agent, joined };
}
