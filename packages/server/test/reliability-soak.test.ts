// Soak: N cycles of create -> exec -> write a file -> checkpoint (DURABLE) -> delete sandbox ->
// delete checkpoint, then look for anything left behind. CI runs a short version (15 cycles);
// `npm run soak` runs 1000 (SANDTREE_SOAK_CYCLES overrides either).
import { existsSync, readdirSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestServer } from "./helpers.js";
import {
  checkpointRows,
  duBytes,
  eventually,
  median,
  percentile,
  qemuPidsFor,
  recordFigures,
  runRootOf,
  settleCheckpoint,
  startServerAt,
} from "./reliability/harness.js";

const CYCLES = Number(process.env.SANDTREE_SOAK_CYCLES ?? 15);
const LONG = CYCLES >= 100;
const MiB = 1024 * 1024;

let t: TestServer;
beforeAll(async () => {
  t = await startServerAt(process.env.SANDTREE_REL_LOG ? { logStream: process.stderr } : {});
});
afterAll(async () => {
  await t?.close();
});

/** Layer files that may stay: image base links and warm templates' disks. */
const permanent = (name: string) => name.startsWith("base-") || name.startsWith("tmpl-");

describe("soak", () => {
  it(`${CYCLES} create/exec/write/checkpoint/delete cycles leave nothing behind`, {
    timeout: CYCLES * 60_000 + 300_000,
  }, async () => {
    const layers = path.join(t.dataDir, "layers");
    const startLayerBytes = duBytes(layers, permanent);
    const ids: string[] = [];
    const cycleMs: number[] = [];
    const rss: number[] = [];
    // The bound: memory after the run within 10% of where it settled after the first 100 cycles.
    const settleAt = CYCLES >= 200 ? 100 : Math.max(1, Math.ceil(CYCLES / 10));
    for (let i = 0; i < CYCLES; i++) {
      const started = performance.now();
      const memory_gb = i % 2 === 0 ? 0.25 : 0.125;
      const c = await t.api("POST", "/v1/sandboxes", {
        image: "sandtree/busybox",
        memory_gb,
        disk_size_gb: 1,
        labels: { soak: "1" },
      });
      expect(c.status, JSON.stringify(c.body)).toBe(201);
      const id: string = c.body.id;
      ids.push(id);
      await t.waitRunning(id);
      const e = await t.api("POST", `/v1/sandboxes/${id}/exec`, { command: `echo cycle-${i}` });
      expect(e.body.stdout).toBe(`cycle-${i}\n`);
      const payload = new Uint8Array(64 * 1024).fill(i % 256);
      const w = await t.api("PUT", `/v1/sandboxes/${id}/files?path=/root/soak-${i}`, payload);
      expect(w.status, JSON.stringify(w.body)).toBe(200);
      const ck = await t.api("POST", `/v1/sandboxes/${id}/checkpoints`, {});
      expect(ck.status, JSON.stringify(ck.body)).toBe(201);
      expect((await settleCheckpoint(t, ck.body.id)).state).toBe("DURABLE");
      expect((await t.api("DELETE", `/v1/sandboxes/${id}`)).status).toBe(200);
      expect((await t.api("DELETE", `/v1/checkpoints/${ck.body.id}`)).status).toBe(200);
      cycleMs.push(performance.now() - started);
      rss.push(process.memoryUsage().rss);
    }

    // No QEMU of these sandboxes is left (a delete may still be finishing the power-off).
    const noQemu = await eventually(() => qemuPidsFor(ids).length === 0, 30_000);
    expect(qemuPidsFor(ids)).toEqual([]);
    // Layers: only base links and templates; no orphan blob.
    await eventually(() => readdirSync(layers).filter((f) => !permanent(f)).length === 0, 30_000);
    const leftovers = readdirSync(layers).filter((f) => !permanent(f));
    expect(leftovers).toEqual([]);
    // Database and blob store agree: every DURABLE checkpoint's layer exists, every layer is referenced.
    const rows = checkpointRows(t.dataDir);
    const missing = rows.filter((r) => r.state === "DURABLE" && !(r.blob_key && existsSync(path.join(layers, r.blob_key))));
    expect(missing).toEqual([]);
    const referenced = new Set(rows.map((r) => r.blob_key));
    const unreferenced = readdirSync(layers).filter((f) => !permanent(f) && !referenced.has(f));
    expect(unreferenced).toEqual([]);
    // No socket directory of a deleted sandbox (templates keep none either once saved).
    const runRoot = runRootOf(t.dataDir);
    const sockets = existsSync(runRoot) ? readdirSync(runRoot).filter((d) => ids.some((id) => d === `sandtree-${id}`)) : [];
    expect(sockets).toEqual([]);
    // Spilled exec output goes with its sandbox; logs stay by design (GET /logs after delete).
    const outputs = ids.filter((id) => existsSync(path.join(t.dataDir, "sandboxes", id, "outputs")));
    expect(outputs).toEqual([]);
    const endLayerBytes = duBytes(layers, permanent);
    expect(endLayerBytes).toBe(startLayerBytes);

    const settled = rss[settleAt - 1] as number;
    const last = rss[rss.length - 1] as number;
    const growth = (last - settled) / settled;
    const logBytes = duBytes(path.join(t.dataDir, "sandboxes"));
    const figures = {
      cycles: CYCLES,
      cycle_ms_p50: Math.round(median(cycleMs)),
      cycle_ms_p95: Math.round(percentile(cycleMs, 95)),
      rss_settled_mib: +(settled / MiB).toFixed(1),
      rss_end_mib: +(last / MiB).toFixed(1),
      rss_growth_pct: +(growth * 100).toFixed(1),
      qemu_left: qemuPidsFor(ids).length,
      qemu_gone_in_time: noQemu,
      layer_files_left: leftovers.length,
      layer_bytes_start: startLayerBytes,
      layer_bytes_end: endLayerBytes,
      socket_dirs_left: sockets.length,
      kept_log_bytes_per_sandbox: Math.round(logBytes / CYCLES),
      db_bytes: duBytes(path.join(t.dataDir, "sandtree.db")) + duBytes(path.join(t.dataDir, "sandtree.db-wal")),
    };
    console.log("soak figures", figures);
    // Long runs hold the 10% bound; 15 cycles are too few for the heap to settle, so CI allows 50%.
    const bound = LONG ? 0.1 : 0.5;
    recordFigures("soak", "soak", {
      tried: `${CYCLES} cycles of create (busybox, 0.25/0.125 GB, 1 GB disk), exec, 64 KiB upload, checkpoint to DURABLE, delete sandbox, delete checkpoint`,
      result: `no QEMU, layer, orphan blob, socket dir or output dir left; RSS ${figures.rss_settled_mib} -> ${figures.rss_end_mib} MiB (${figures.rss_growth_pct}%, bound ${bound * 100}%); cycle p50 ${figures.cycle_ms_p50} ms`,
      figures,
    });
    expect(growth).toBeLessThan(bound);
  });
});
