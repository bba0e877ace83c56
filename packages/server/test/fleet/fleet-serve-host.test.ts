// `sandtree worker --serve-host`: a real worker process serves its machine host beside its API, and
// a RemoteHost with the worker's call key (derived from the join token and the host's secret, as
// the control plane derives it) reaches it; any other key is refused. No VM: the conformance suite
// (packages/host/test/conformance/remote-*.test.ts) runs machines through a remote host.
import type { ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { connectRemoteHost } from "@sandtree/host";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { workerCallKey } from "../../src/services/fleet/join-token.js";
import { spawnServe, stopChildProcess } from "../helpers.js";
import { ENV, startWorker, type Worker } from "./worker-harness.js";

describe("fleet: a worker serves its machine host", () => {
  const dirs: string[] = [];
  let cp: ChildProcess | null = null;
  let worker: Worker | null = null;
  let token = "";
  let cpDir = "";

  beforeAll(async () => {
    cpDir = mkdtempSync(path.join(tmpdir(), "sandtree-cp-"));
    dirs.push(cpDir);
    const started = await spawnServe(cpDir, { env: ENV });
    cp = started.proc;
    token = readFileSync(path.join(cpDir, "join-token"), "utf8").trim();
    const dir = mkdtempSync(path.join(tmpdir(), "sandtree-wh-"));
    dirs.push(dir);
    worker = await startWorker(started.url, token, "wh", dir, ["--serve-host", "127.0.0.1:0"]);
  }, 300_000);

  afterAll(async () => {
    if (worker) await stopChildProcess(worker.proc, "SIGTERM");
    await stopChildProcess(cp, "SIGTERM");
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }, 120_000);

  it("answers the control plane's key for that host, and no other", async () => {
    const hostUrl = /machine host served at (http:\/\/[\d.:]+)/.exec(worker?.output() ?? "")?.[1];
    expect(hostUrl, worker?.output()).toBeDefined();
    const db = new Database(path.join(cpDir, "sandtree.db"), { readonly: true, fileMustExist: true });
    const row = db.prepare("SELECT id, secret_hash FROM hosts WHERE name = ?").get("wh") as { id: string; secret_hash: string };
    db.close();
    const host = await connectRemoteHost({ url: hostUrl ?? "", key: workerCallKey(token, row.id, row.secret_hash) });
    try {
      expect(host.capabilities.accel).toMatch(/^(tcg|kvm)/);
      expect(await host.survivors()).toEqual([]);
    } finally {
      host.close();
    }
    await expect(connectRemoteHost({ url: hostUrl ?? "", key: token })).rejects.toMatchObject({ code: "UNAUTHORIZED" });
  });

  it("stores a layer of its layers directory in its own blob store, and fetches it back", async () => {
    const hostUrl = /machine host served at (http:\/\/[\d.:]+)/.exec(worker?.output() ?? "")?.[1] ?? "";
    const db = new Database(path.join(cpDir, "sandtree.db"), { readonly: true, fileMustExist: true });
    const row = db.prepare("SELECT id, secret_hash FROM hosts WHERE name = ?").get("wh") as { id: string; secret_hash: string };
    db.close();
    const host = await connectRemoteHost({ url: hostUrl, key: workerCallKey(token, row.id, row.secret_hash) });
    try {
      // A file the worker froze, in its layers directory: the control plane names it, never reads it.
      const file = path.join(worker?.dir ?? "", "layers", "ck-served-layer");
      writeFileSync(file, "a layer's bytes");
      const sha256 = createHash("sha256").update("a layer's bytes").digest("hex");
      expect(await host.layers().store("ck-served-layer")).toEqual({ sha256, size: 15 });
      await host.layers().fetch("ck-served-layer", sha256);
      expect(existsSync(file)).toBe(true);
      await expect(host.layers().fetch("ck-served-layer", "0".repeat(64))).rejects.toMatchObject({ code: "CHECKPOINT_CORRUPT" });
    } finally {
      host.close();
    }
  });
});
