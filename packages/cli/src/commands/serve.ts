import { spawn } from "node:child_process";
import { join } from "node:path";
import { ACCEL_CHOICES, type AccelChoice } from "@sandtree/protocol";
import { type Command, Option } from "commander";
import type { CliContext } from "../context.js";
import { parseIntArg } from "../kv.js";
import { repoCheckout, SERVER_NEEDS } from "../paths.js";
import { kvmDeviceUsable, serveInfoLines } from "../serve-info.js";

interface ServeFlags {
  dataDir?: string;
  database?: string;
  host?: string;
  port?: number;
  accel?: AccelChoice;
  logFormat?: "auto" | "pretty" | "json";
  blobStore?: string;
}

type ServerModule = typeof import("@sandtree/server");

// A variable specifier keeps the CLI compiling (and its other commands working) when the
// server package is not built; `serve` reports that instead.
const SERVER_MODULE = "@sandtree/server";

/** The server package, loaded when a command needs it (`serve`, `worker`), or a clear error. */
export async function loadServerModule(command: string): Promise<ServerModule> {
  try {
    return (await import(SERVER_MODULE)) as ServerModule;
  } catch (err) {
    const clone = repoCheckout();
    const missing = (err as { code?: unknown }).code === "ERR_MODULE_NOT_FOUND";
    const why =
      clone !== null
        ? `build it in ${clone} with \`npm run build\` (or \`bash scripts/setup.sh\`)`
        : missing
          ? `this CLI is installed without it: ${SERVER_NEEDS}`
          : "it is installed but does not load";
    throw Object.assign(
      new Error(`\`sandtree ${command}\` could not load ${SERVER_MODULE}: ${why} (${(err as Error).message})`),
      {
        code: "SERVER_NOT_AVAILABLE",
      },
    );
  }
}

export function registerServeCommands(program: Command, ctx: CliContext): void {
  program
    .command("serve")
    .description("run the sandtree server in the foreground")
    .option("--data-dir <dir>", "state directory (default: $SANDTREE_DATA_DIR, then ${XDG_DATA_HOME:-~/.local/share}/sandtree)")
    .option(
      "--database <url>",
      "a postgres:// URL: keep the state in PostgreSQL, shareable by several servers (default: $SANDTREE_DATABASE_URL, then SQLite in the data dir)",
    )
    .option("--host <host>", "address to listen on (default: $SANDTREE_HOST, then 127.0.0.1)")
    .option("--port <port>", "port to listen on (default: $SANDTREE_PORT, then 7070)", parseIntArg("--port", 0))
    .addOption(new Option("--accel <mode>", "VM acceleration (default: $SANDTREE_ACCEL, then auto)").choices([...ACCEL_CHOICES]))
    .addOption(
      new Option(
        "--log-format <format>",
        "log lines: pretty on a terminal, JSON otherwise (default: $SANDTREE_LOG_FORMAT, then auto)",
      ).choices(["auto", "pretty", "json"]),
    )
    .option(
      "--blob-store <url>",
      "where checkpoint layers are stored durably: s3://BUCKET[/PREFIX]?endpoint=URL&region=R (credentials from the AWS_* variables), or a directory (default: $SANDTREE_BLOB_STORE, then DATA_DIR/layers)",
    )
    .action(async (o: ServeFlags) => {
      const mod = await loadServerModule("serve");
      if (typeof mod.runServer !== "function") {
        throw Object.assign(new Error(`${SERVER_MODULE} does not export runServer`), { code: "SERVER_NOT_AVAILABLE" });
      }
      // Only flags given are passed: the server applies SANDTREE_* variables, then its defaults.
      // Resolves once listening; the server keeps the process alive and handles its own signals.
      const server = await mod.runServer({
        ...(o.dataDir !== undefined ? { dataDir: o.dataDir } : {}),
        ...(o.database !== undefined ? { database: o.database } : {}),
        ...(o.host !== undefined ? { host: o.host } : {}),
        ...(o.port !== undefined ? { port: o.port } : {}),
        ...(o.accel !== undefined ? { accel: o.accel } : {}),
        ...(o.logFormat !== undefined ? { logFormat: o.logFormat } : {}),
        ...(o.blobStore !== undefined ? { blobStore: o.blobStore } : {}),
      });
      const envAccel = ctx.env.SANDTREE_ACCEL as AccelChoice | undefined;
      const choice = o.accel ?? envAccel ?? "auto";
      const lines = serveInfoLines({
        choice,
        choiceFrom: o.accel ? "--accel" : envAccel ? "SANDTREE_ACCEL" : "default",
        // The server's own verdict, read back from its cache (or the explicit choice).
        accel: await mod.detectAccel(choice, { trialMs: Number(ctx.env.SANDTREE_ACCEL_TRIAL_MS) || 5000 }),
        kvmDevice: kvmDeviceUsable(),
        networkEnabled: server.services.network.enabled,
        networkUnavailable: server.services.network.unavailable,
      });
      ctx.stdout.write(lines.map((l) => `${l}\n`).join(""));
    });

  program
    .command("setup")
    .description("prepare this machine: kernel, guest image, checks (runs scripts/setup.sh)")
    .argument("[args...]", "passed to setup.sh")
    .action(async (args: string[]) => {
      const clone = repoCheckout();
      if (clone === null) {
        throw Object.assign(
          new Error(
            `\`sandtree setup\` runs scripts/setup.sh of a clone, and this CLI is installed from its package: ${SERVER_NEEDS}`,
          ),
          {
            code: "SETUP_NOT_AVAILABLE",
          },
        );
      }
      ctx.exitCode = await runInherited("bash", [join(clone, "scripts", "setup.sh"), ...args]);
    });
}

/** Runs a child with our stdio; resolves with its exit status (128+N if killed by signal N). */
function runInherited(command: string, args: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: "inherit" });
    child.on("error", reject);
    child.on("exit", (code, signal) => {
      if (code !== null) return resolve(code);
      const n = signal ? (OS_SIGNALS[signal] ?? 1) : 1;
      resolve(128 + n);
    });
  });
}

const OS_SIGNALS: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGTERM: 15 };
