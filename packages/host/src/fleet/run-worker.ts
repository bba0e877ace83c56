import { mkdirSync } from "node:fs";
import path from "node:path";
import type { AccelChoice, RegisterHostResponse } from "@sandtree/protocol";
import { ImageStore } from "../images/image-store.js";
import { cacheDir, defaultDataDir } from "../paths.js";
import { detectAccel } from "../vmm/accel.js";
import { machineCapacity } from "./capacity.js";
import { WorkerAgent, type WorkerAgentOptions } from "./worker-agent.js";

/** The options runWorker hands its WorkerAgent as they are. */
type AgentOptionsPassed =
  | "joinUrls"
  | "joinToken"
  | "name"
  | "version"
  | "url"
  | "hostUrl"
  | "blobStore"
  | "onRegistered"
  | "log";

export interface RunWorkerOptions extends Pick<WorkerAgentOptions, AgentOptionsPassed> {
  /** Default: the server's data dir (~/.local/share/sandtree). */
  dataDir?: string;
  /** Default: ~/.cache/sandtree (its images are reported). */
  cacheDir?: string;
  accel?: AccelChoice;
  /** vCPUs offered to placements (default: this machine's CPUs; more overcommits them). */
  vcpus?: number;
  /** The checkpoint layers this host holds (their blob keys), reported as locality. */
  layers?: () => Promise<string[]>;
}

/**
 * `sandtree worker`: joins the control plane with this machine's real capacity (CPUs, memory,
 * free disk of the data dir, the accelerator by trial) and the images in its cache, then
 * heartbeats until stopped. With `url` it also runs sandboxes: the server package's
 * startFleetWorker serves them there and gives the control plane a key on each registration.
 */
export async function runWorker(o: RunWorkerOptions): Promise<{ agent: WorkerAgent; joined: RegisterHostResponse }> {
  const { dataDir: ownDataDir, cacheDir: ownCacheDir, accel: accelChoice, vcpus, layers, ...passed } = o;
  const dataDir = ownDataDir ?? defaultDataDir();
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const accel = await detectAccel(accelChoice ?? "auto");
  const images = new ImageStore({ root: path.join(ownCacheDir ?? cacheDir(), "images") });
  const agent = new WorkerAgent({
    ...passed,
    capacity: () => {
      const c = machineCapacity(dataDir, accel);
      return vcpus ? { ...c, vcpus } : c;
    },
    locality: async () => ({
      images: [...new Set((await images.list().catch(() => [])).map((i) => i.digest))].sort(),
      templates: [],
      layers: layers ? (await layers().catch(() => [])).sort() : [],
    }),
  });
  const joined = await agent.start();
  return { agent, joined };
}
