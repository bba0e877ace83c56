// A flattening interrupted by a restart, finished at the next start (finishInterruptedFlattens):
// the flattened layer lies under a name the host takes (tmp-flat-<id>), or, written before names
// were checked, under a hidden one (.tmp-flat-<id>).
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { LocalDirBlobStore } from "@sandtree/host";
import { FakeHost } from "@sandtree/host/fake";
import { afterAll, beforeAll, expect, it } from "vitest";
import { SqliteStore } from "../src/index.js";
import { finishInterruptedFlattens } from "../src/services/checkpoints/checkpoint-flatten.js";
import type { Logger } from "../src/services/observability/logger.js";
import { addSandbox, checkpointRow } from "./store/fixtures.js";

const silent: Logger = { info() {}, warn() {}, error() {} };
const sha = (s: string) => createHash("sha256").update(s).digest("hex");

let dir: string;
let store: SqliteStore;
beforeAll(() => {
  dir = mkdtempSync(path.join(tmpdir(), "sandtree-flatten-resume-"));
  store = new SqliteStore(path.join(dir, "sandtree.db"));
});
afterAll(async () => {
  await store?.close();
  rmSync(dir, { recursive: true, force: true });
});

it("swaps in a flattened layer whose hash is recorded, under either name, and removes the rest", async () => {
  const layers = path.join(dir, "layers");
  mkdirSync(layers);
  const blobs = new LocalDirBlobStore(layers);
  const team = await store.createTeam("t");
  const sb = await addSandbox(store, team.id, { status: "RUNNING" });
  const rows = ["named", "hidden", "unrecorded"].map((what) =>
    checkpointRow(team.id, sb.id, { state: "DURABLE", blob_key: `${what}.qcow2`, sha256: sha(`${what} flat`), stored_bytes: 1 }),
  );
  for (const r of rows) {
    await store.insertCheckpoint(r);
    writeFileSync(path.join(layers, r.blob_key as string), `${r.blob_key} deep`);
  }
  const [named, hidden, unrecorded] = rows as [(typeof rows)[0], (typeof rows)[0], (typeof rows)[0]];
  writeFileSync(path.join(layers, `tmp-flat-${named.id}`), "named flat");
  writeFileSync(path.join(layers, `.tmp-flat-${hidden.id}`), "hidden flat");
  // Flattened, but the crash came before its hash was recorded: the recorded layer stays.
  writeFileSync(path.join(layers, `tmp-flat-${unrecorded.id}`), "other bytes");
  writeFileSync(path.join(layers, "tmp-flat-ck-0000"), "no such checkpoint");

  // The host's layers directory is the blob store's, as a server's default host's.
  const host = new FakeHost({ layersDir: layers });
  await finishInterruptedFlattens({ store, layers: host.layers(blobs), host, log: silent });

  expect(readFileSync(path.join(layers, "named.qcow2"), "utf8")).toBe("named flat");
  expect(readFileSync(path.join(layers, "hidden.qcow2"), "utf8")).toBe("hidden flat");
  expect(readFileSync(path.join(layers, "unrecorded.qcow2"), "utf8")).toBe("unrecorded.qcow2 deep");
  for (const gone of [`tmp-flat-${named.id}`, `.tmp-flat-${hidden.id}`, `tmp-flat-${unrecorded.id}`, "tmp-flat-ck-0000"])
    expect(existsSync(path.join(layers, gone)), gone).toBe(false);
});
