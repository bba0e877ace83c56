import { hostname } from "node:os";
import { ACCEL_CHOICES, type AccelChoice, HostName } from "@sandtree/protocol";
import { type Command, InvalidArgumentError, Option } from "commander";
import type { CliContext } from "../context.js";
import { UsageError } from "../errors.js";
import { VERSION } from "../version.js";
import { loadServerModule } from "./serve.js";

interface WorkerFlags {
  join: string[];
  joinToken?: string;
  dataDir?: string;
  name?: string;
  accel?: AccelChoice;
  listen?: { host: string; port: number };
  url?: string;
  vcpus?: number;
  serveHost?: { host: string; port: number };
}

/** HOST:PORT ([v6]:PORT) where the worker's sandbox API listens. */
function listenArg(input: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(input);
  const port = Number(m?.[3]);
  if (!m || port > 65535) throw new InvalidArgumentError("expected HOST:PORT, e.g. 0.0.0.0:7071");
  return { host: m[1] ?? m[2] ?? "", port };
}

function urlArg(input: string): string {
  try {
    const u = new URL(input);
    if (u.protocol === "http:" || u.protocol === "https:") return input.replace(/\/+$/, "");
  } catch {}
  throw new InvalidArgumentError("expected an http:// or https:// URL");
}

/** --join: repeated or comma-separated, each an http(s) URL; collected in order. */
function joinArg(input: string, previous: string[] = []): string[] {
  const urls = input.split(",").map((u) => u.trim());
  if (urls.some((u) => u === "")) throw new InvalidArgumentError("expected URLs separated by commas");
  return [...previous, ...urls.map(urlArg)];
}

function vcpusArg(input: string): number {
  const n = Number(input);
  if (!/^\d+$/.test(input) || n < 1 || n > 4096) throw new InvalidArgumentError("expected a whole number from 1 to 4096");
  return n;
}

function hostNameArg(input: string): string {
  const r = HostName.safeParse(input);
  if (!r.success) throw new InvalidArgumentError(r.error.issues[0]?.message ?? "invalid host name");
  return input;
}

/**
 * `sandtree worker`: runs sandboxes for a control plane. It serves this machine's host (the host
 * interface) on --listen (its state in --data-dir), joins the control plane with that URL and
 * heartbeats until SIGTERM/SIGINT; the control plane places creates here and runs them through it.
 */
export function registerWorkerCommands(program: Command, ctx: CliContext): void {
  program
    .command("worker")
    .description(
      "join a control plane as a fleet host and run the sandboxes it places here: serves this machine's host on " +
        "--listen (only the control plane may call it), registers this machine's capacity, images and that URL, then " +
        "heartbeats until stopped",
    )
    .requiredOption(
      "--join <url>",
      "the control plane's URL, e.g. http://10.0.0.5:7070; several control planes on one database: repeat it or " +
        "separate URLs with commas (the worker moves to the next when one stops answering)",
      joinArg,
    )
    .option("--join-token <token>", "the join token `sandtree serve` printed (default: $SANDTREE_JOIN_TOKEN)")
    .option(
      "--data-dir <dir>",
      "this host's own state and sandbox disks; its free disk is reported (default: $SANDTREE_DATA_DIR)",
    )
    .option("--name <name>", "this host's name in the fleet (default: the machine's hostname)", hostNameArg)
    .option(
      "--listen <host:port>",
      "where this worker's machine host listens for the control plane (default 127.0.0.1:7071)",
      listenArg,
    )
    .option("--url <url>", "the URL the control plane calls (default: http://<listen address>)", urlArg)
    .option(
      "--serve-host <host:port>",
      "where this worker serves its machine host (the host interface as a Connect-RPC service over HTTP/2), which " +
        "the control plane runs its sandboxes through (default: the --listen address)",
      listenArg,
    )
    .option(
      "--vcpus <n>",
      "vCPUs offered to placements (default: $SANDTREE_WORKER_VCPUS, then this machine's CPUs; more overcommits them)",
      vcpusArg,
    )
    .addOption(
      new Option("--accel <mode>", "VM acceleration reported (default: $SANDTREE_ACCEL, then auto)").choices([...ACCEL_CHOICES]),
    )
    .action(async (o: WorkerFlags) => {
      const joinToken = o.joinToken ?? ctx.env.SANDTREE_JOIN_TOKEN;
      if (!joinToken)
        throw new UsageError("--join-token (or SANDTREE_JOIN_TOKEN) is required: the token `sandtree serve` printed");
      const name = o.name ?? hostname().split(".")[0] ?? "worker";
      if (!HostName.safeParse(name).success)
        throw new UsageError(`this machine's hostname ${name} is not a valid host name: pass --name`);
      const mod = await loadServerModule("worker");
      const dataDir = o.dataDir ?? ctx.env.SANDTREE_DATA_DIR;
      const cacheDir = ctx.env.SANDTREE_CACHE_DIR;
      const accel = o.accel ?? (ctx.env.SANDTREE_ACCEL as AccelChoice | undefined);
      if (o.listen?.host === "0.0.0.0" && !o.url)
        throw new UsageError("--listen 0.0.0.0:PORT needs --url: the address the control plane reaches this worker at");
      const envVcpus = ctx.env.SANDTREE_WORKER_VCPUS;
      let vcpus = o.vcpus;
      if (vcpus === undefined && envVcpus) {
        try {
          vcpus = vcpusArg(envVcpus);
        } catch (err) {
          throw new UsageError(`SANDTREE_WORKER_VCPUS: ${(err as Error).message}`);
        }
      }
      const worker = await mod.startFleetWorker({
        joinUrls: o.join,
        joinToken,
        name,
        version: VERSION,
        ...(dataDir ? { dataDir } : {}),
        ...(cacheDir ? { cacheDir } : {}),
        ...(accel ? { accel } : {}),
        ...(vcpus ? { vcpus } : {}),
        ...(o.listen ? { host: o.listen.host, port: o.listen.port } : {}),
        ...(o.url ? { advertiseUrl: o.url } : {}),
        ...(o.serveHost ? { serveHost: o.serveHost } : {}),
        ...(ctx.env.SANDTREE_BLOB_STORE ? { blobStore: ctx.env.SANDTREE_BLOB_STORE } : {}),
        log: (line) => ctx.stderr.write(`${line}\n`),
      });
      const { joined } = worker;
      ctx.stdout.write(
        `joined ${worker.joinedAt} as ${joined.name} (${joined.host_id}); sandboxes served at ${worker.url}; ` +
          `heartbeating every ${joined.heartbeat_interval_ms} ms until SIGTERM; ` +
          `checkpoint layers in ${joined.blob_store ?? "its data dir"}` +
          `; machine host served at ${worker.hostUrl}\n`,
      );
      await new Promise<void>((resolve) => {
        const stop = () => {
          process.off("SIGINT", stop);
          process.off("SIGTERM", stop);
          void worker.close().then(resolve, resolve);
        };
        process.on("SIGINT", stop);
        process.on("SIGTERM", stop);
      });
      ctx.stdout.write(`stopped after ${worker.beats()} heartbeats\n`);
      // As `serve` does: stopped means exit, whatever connection or timer is still open.
      setTimeout(() => process.exit(ctx.exitCode), 1000).unref();
    });
}
