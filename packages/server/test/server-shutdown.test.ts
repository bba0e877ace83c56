// A server's close() after memory forks with sandbox networking on (#22): it must resolve and
// leave nothing behind (no nftables table, no tap, no QEMU, no RAM file on tmpfs), and the
// process must then exit by itself. The server runs in a child process inside a network
// namespace this test makes, so what it leaves is visible and nothing else's is counted.
import type { ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, rmSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { volumeServerUnavailableReason } from "@sandtree/host";
import { afterAll, describe, expect, it } from "vitest";
import { ServerNetns } from "./shutdown/server-netns.js";

const SCRIPT = fileURLToPath(new URL("./shutdown/serve-fork-close.mjs", import.meta.url));
const VOLUME_SCRIPT = fileURLToPath(new URL("./shutdown/serve-volume-close.mjs", import.meta.url));
const ns = new ServerNetns("sthalt");
const volumeNs = new ServerNetns("sthaltv");
/** Bound on the exit after close(): a healthy process exits at once; a regression must fail, not hang. */
const EXIT_AFTER_CLOSE_MS = 60_000;

let dataDir = "";

afterAll(() => {
  // Whatever a failure left: the child, the namespace, the files.
  ns.destroy();
  volumeNs.destroy();
  if (dataDir) rmSync(ramDirOf(dataDir), { recursive: true, force: true });
});

/** Waits for the child's exit, or says it still runs EXIT_AFTER_CLOSE_MS after close() resolved. */
function exitAfterClose(proc: ChildProcess, output: { stdout: string }): Promise<number | string> {
  let closedAt = 0;
  proc.stdout?.on("data", () => {
    if (!closedAt && output.stdout.includes('"closed":true')) closedAt = Date.now();
  });
  return new Promise<number | string>((resolve) => {
    const check = setInterval(() => {
      if (closedAt && Date.now() - closedAt > EXIT_AFTER_CLOSE_MS) {
        clearInterval(check);
        resolve(`still running ${EXIT_AFTER_CLOSE_MS / 1000} s after close() resolved`);
      }
    }, 500);
    proc.once("exit", (code, signal) => {
      clearInterval(check);
      resolve(code ?? String(signal));
    });
  });
}

/** The server's tmpfs directory for RAM files (ram-placement.ts: named like its run root). */
function ramDirOf(dir: string): string {
  return path.join("/dev/shm", `sandtree-${createHash("sha256").update(path.resolve(dir)).digest("hex").slice(0, 10)}`);
}

describe("server shutdown", () => {
  it("close() after memory forks with networking on leaves no table, tap, VM or RAM file, and the process exits", {
    timeout: 600_000,
  }, async () => {
    const { proc, out: output, dataDir: dir } = ns.startServerScript(SCRIPT, "sandtree-shutdown-");
    dataDir = dir;
    const exit = await exitAfterClose(proc, output);
    const out = JSON.parse(output.stdout.trim().split("\n").at(-1) ?? "{}");
    expect(out.error, output.stderr).toBeUndefined();
    expect(out.children).toEqual(["memory", "memory"]);
    expect(out.childSays).toBe("child");
    expect(out.checkpoint).toBe("FROZEN");
    expect(out.closed).toBe(true);
    expect(exit, output.stderr).toBe(0);
    const left = ns.leftovers();
    expect(left.tables).not.toContain("sandtree_");
    expect(left.taps).toEqual([]);
    expect(ns.pids()).toEqual([]);
    expect(existsSync(ramDirOf(dataDir))).toBe(false);
  });

  it.skipIf(volumeServerUnavailableReason() !== null)(
    "close() with a volume mounted stops the host's file server after its VM, unmounts the volume's image, and the process exits",
    { timeout: 600_000 },
    async () => {
      const { proc, out: output } = volumeNs.startServerScript(VOLUME_SCRIPT, "sandtree-shutdown-vol-");
      const exit = await exitAfterClose(proc, output);
      const out = JSON.parse(output.stdout.trim().split("\n").at(-1) ?? "{}");
      expect(out.error, output.stderr).toBeUndefined();
      expect(out.guestWrote).toBe("kept");
      expect(out.fileServerPid).toBeGreaterThan(0);
      expect(out.closed).toBe(true);
      expect(out.volumesMounted).toBe(false);
      expect(exit, output.stderr).toBe(0);
      expect(existsSync(`/proc/${out.fileServerPid}`)).toBe(false);
      const left = volumeNs.leftovers();
      expect(left.tables).not.toContain("sandtree_");
      expect(left.taps).toEqual([]);
      expect(volumeNs.pids()).toEqual([]);
    },
  );
});
