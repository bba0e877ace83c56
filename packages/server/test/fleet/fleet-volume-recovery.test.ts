// A lost worker's volumes, as a state machine (no VM, no worker process): a control plane with an
// S3 bucket (s3rver) and a registered host `wx` that never beats. Volumes are made on the control
// plane's host and recorded as living on wx (one with a synced copy in the bucket, packed here as
// wx would have). Once wx is LOST: the never-synced one is 410 VOLUME_LOST on use and can be
// deleted; a restore that a control plane stopped midway (MOVING in its store) is finished at its
// next start, from the bucket, and the volume answers the time its data is as of; a synced volume
// whose host comes back before anyone used it is that host's again. Time is a ManualClock.
import { mkdtempSync, rmSync, unlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { LocalVolumes } from "@sandtree/host";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startS3, type TestS3, useS3Credentials } from "../../../host/test/helpers/s3-server.js";
import { BlobStoreUrl, makeBlobStore } from "../../src/blob-store-config.js";
import { ManualClock, type RunningServer, startServer } from "../../src/index.js";
import { type Api, jsonApi } from "../helpers.js";

const BOUND_MS = 30_000;
const SYNCED_AT = "2026-06-01T00:00:00.000Z";

describe("fleet: a lost worker's volumes (state machine)", () => {
  let s3: TestS3;
  let server: RunningServer | null = null;
  let dataDir: string;
  let cacheDir: string;
  let blobUrl: string;
  let admin: Api;
  let wx: { host_id: string; secret: string };
  const clock = new ManualClock(Date.parse("2026-06-01T00:10:00Z"));
  let restoreEnv = () => {};

  const start = async () => {
    server = await startServer(
      {
        dataDir,
        host: "127.0.0.1",
        port: 0,
        logger: false,
        network: "off",
        hostLostAfterMs: BOUND_MS,
        volumeSyncS: 1,
        blobStore: blobUrl,
      },
      { fleetClock: clock },
    );
    const key = server.firstKey ?? adminKey;
    adminKey = key;
    admin = jsonApi(server.url, () => key);
  };
  let adminKey = "";
  const sql = (run: (db: Database.Database) => void) => {
    const db = new Database(path.join(dataDir, "sandtree.db"));
    try {
      run(db);
    } finally {
      db.close();
    }
  };
  const makeVolume = async (name: string, file: string) => {
    const made = await admin("POST", "/v1/volumes", { name, size_gb: 1 });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const put = await admin("PUT", `/v1/volumes/${name}/files?path=/a.txt`, new TextEncoder().encode(file));
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    return made.body.id as string;
  };
  /** The volume recorded as living on wx, with its directory here emptied (only the bucket's copy holds its files). */
  const onWx = (id: string, sync?: { key: string; sha256: string; size: number }) => {
    sql((db) =>
      db
        .prepare("UPDATE volumes SET host_id = ?, sync_key = ?, sync_sha256 = ?, synced_bytes = ?, synced_at = ? WHERE id = ?")
        .run(wx.host_id, sync?.key ?? null, sync?.sha256 ?? null, sync?.size ?? null, sync ? SYNCED_AT : null, id),
    );
    unlinkSync(path.join(dataDir, "volumes", id, "data", "a.txt"));
  };
  const volume = async (ref: string) => (await admin("GET", `/v1/volumes/${ref}`)).body;

  beforeAll(async () => {
    restoreEnv = useS3Credentials();
    s3 = await startS3("sandtree-volume-recovery");
    blobUrl = `s3://${s3.bucket}/vr?endpoint=${s3.endpoint}&region=us-east-1`;
    dataDir = mkdtempSync(path.join(tmpdir(), "sandtree-vr-"));
    cacheDir = mkdtempSync(path.join(tmpdir(), "sandtree-vr-cache-"));
    await start();
    const token = (server as RunningServer).services.fleet.joinToken;
    const reg = await jsonApi((server as RunningServer).url, () => token)("POST", "/v1/fleet/hosts/register", {
      name: "wx",
      capacity: { vcpus: 8, memory_mib: 16_384, disk_gib: 100, accel: "tcg" },
    });
    expect(reg.status, JSON.stringify(reg.body)).toBe(201);
    wx = reg.body;
  });

  afterAll(async () => {
    await server?.close();
    await s3?.close();
    restoreEnv();
    for (const d of [dataDir, cacheDir]) if (d) rmSync(d, { recursive: true, force: true });
  });

  it("never synced: 410 VOLUME_LOST on use; synced and stopped mid-restore: finished at the next start, as of its sync", async () => {
    const gone = await makeVolume("gone", "never synced\n");
    const kept = await makeVolume("kept", "synced\n");
    // kept's copy in the bucket, as wx's sync would have left it.
    const blobs = makeBlobStore(BlobStoreUrl.parse(blobUrl), cacheDir);
    const here = new LocalVolumes(() => path.join(dataDir, "volumes"));
    const packed = await here.archives(blobs).store(kept, `volume-${kept}-test.tar`);
    onWx(gone);
    onWx(kept, packed);
    expect(await volume("kept")).toMatchObject({ synced_at: SYNCED_AT, synced_bytes: packed.size, home_lost_at: null });

    clock.advance(BOUND_MS + 1000);
    const lost = await (server as RunningServer).services.fleet.reap();
    expect(lost.map((l) => l.host.name)).toEqual(["wx"]);
    expect((await volume("gone")).home_lost_at).toEqual(expect.any(String));

    // Never synced: its data is gone (410 on use); a delete goes through.
    const read = await admin("GET", "/v1/volumes/gone/files?path=/a.txt");
    expect([read.status, read.body.code], JSON.stringify(read.body)).toEqual([410, "VOLUME_LOST"]);
    expect((await admin("DELETE", `/v1/volumes/${gone}`)).status).toBe(204);

    // A control plane stopped right after it began the restore (MOVING to its own host) finishes it at its start.
    const local = (await admin("GET", "/v1/hosts")).body.hosts.find((h: { name: string }) => h.name === "local").id as string;
    sql((db) => db.prepare("UPDATE volumes SET status = 'MOVING', move_to = ? WHERE id = ?").run(local, kept));
    await (server as RunningServer).close();
    server = null;
    await start();
    expect(await volume("kept")).toMatchObject({
      status: "READY",
      home_lost_at: null,
      restored_as_of: SYNCED_AT,
      synced_at: SYNCED_AT,
    });
    const got = await admin("GET", "/v1/volumes/kept/files?path=/a.txt");
    expect([got.status, got.body]).toEqual([200, "synced\n"]);
    // wx's copy is stale: recorded, to be dropped when wx comes back.
    sql((db) =>
      expect(db.prepare("SELECT host_id FROM volume_stale_copies WHERE volume_id = ?").all(kept)).toEqual([
        { host_id: wx.host_id },
      ]),
    );
  });

  it("a synced volume whose host comes back before it was used is that host's again (no fork)", async () => {
    const wxApi = jsonApi((server as RunningServer).url, () => wx.secret);
    expect((await wxApi("POST", `/v1/fleet/hosts/${wx.host_id}/heartbeat`, {})).body.state).toBe("ACTIVE");
    const back = await makeVolume("back", "on wx\n");
    onWx(back, { key: `volume-${back}-none.tar`, sha256: "0".repeat(64), size: 1 });
    clock.advance(BOUND_MS + 1000);
    await (server as RunningServer).services.fleet.reap();
    expect((await volume("back")).home_lost_at).toEqual(expect.any(String));
    const beat = await wxApi("POST", `/v1/fleet/hosts/${wx.host_id}/heartbeat`, {});
    expect([beat.status, beat.body.state]).toEqual([200, "ACTIVE"]);
    // The sync loop (every second here) sees wx back: the volume's home holds again, no restore.
    const deadline = Date.now() + 30_000;
    while ((await volume("back")).home_lost_at !== null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    expect(await volume("back")).toMatchObject({ status: "READY", home_lost_at: null, restored_as_of: null });
    // wx has no URL here: its stale copy of `kept` is forgotten once it is back (a worker with one is asked to drop it).
    sql((db) => expect(db.prepare("SELECT COUNT(*) AS n FROM volume_stale_copies").get()).toEqual({ n: 0 }));
  });
});
