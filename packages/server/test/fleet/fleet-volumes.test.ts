// A volume moves between fleet hosts through the object store (#36's fleet "Done when"): `sandtree
// serve` (SQLite, an S3 blob store: s3rver) and two `sandtree worker` children with sandbox networks
// and NFS-Ganesha, each in its own network namespace (runs as root: ip netns). The volume is made on
// the control plane's host; a sandbox pinned on wa mounts it (moved there) and writes; a create
// pinned on wb meanwhile is refused (mounted on wa); once wa's sandbox is deleted, one pinned on wb
// mounts it (moved from wa) and reads wa's files; deleted too, a move wb -> wa that a control plane
// killed -9 left MOVING is finished at its restart, and the file API brings the volume home.
// Then a lost worker's volume comes back from the bucket: the control plane, restarted with a short
// HOST_LOST bound and a 2 s sync, syncs a volume a sandbox on wa writes to; wa is frozen (SIGSTOP:
// no heartbeat, no answer) until it is LOST; a sandbox on wb mounts the volume, restored from its
// last sync, and reads the synced files; wa, resumed, has its stale copy dropped.
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { volumeServerUnavailableReason } from "@sandtree/host";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { S3RVER_CREDENTIALS, startS3, type TestS3 } from "../../../host/test/helpers/s3-server.js";
import { type Api, jsonApi, stopChildProcess } from "../helpers.js";
import { createFleetNets, type FleetNets } from "./fleet-netns.js";
import {
  type ControlPlane,
  ENDED,
  SMALL,
  startControlPlane,
  startWorkerIn,
  until,
  type Worker,
  waitRunning,
} from "./worker-harness.js";

const unavailable = volumeServerUnavailableReason();
const AWS = { AWS_ACCESS_KEY_ID: S3RVER_CREDENTIALS.accessKeyId, AWS_SECRET_ACCESS_KEY: S3RVER_CREDENTIALS.secretAccessKey };

describe.skipIf(unavailable !== null)(
  `fleet: volumes move between hosts${unavailable ? ` (skipped: ${unavailable})` : ""}`,
  () => {
    const dirs: string[] = [];
    const workers: Worker[] = [];
    let nets: FleetNets | null = null;
    let s3: TestS3 | null = null;
    let cp: ControlPlane | null = null;
    let api: Api;
    let cpArgs: string[] = [];
    let cpEnv: Record<string, string> = {};

    const mkdir = (name: string) => {
      const d = mkdtempSync(path.join(tmpdir(), `sandtree-fv-${name}-`));
      dirs.push(d);
      return d;
    };
    const sh = async (id: string, command: string) => {
      const r = await api("POST", `/v1/sandboxes/${id}/exec`, { command, timeout_seconds: 60 });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      return r.body as { stdout: string; stderr: string; exit_code: number };
    };
    /**
     * The state of the volume's copy on a worker's host (named by the control plane's volume id in
     * its volumes directory): READY while its host holds it, DELETED once removed there.
     */
    const volumeOn = (worker: string, id: string) => {
      const w = workers.find((x) => x.name === worker) as Worker;
      return existsSync(path.join(w.dir, "volumes", id)) ? "READY" : "DELETED";
    };
    const context = () => workers.map((w) => `--- ${w.name}\n${w.output().slice(-3000)}`).join("\n");
    const ended = (id: string) =>
      until(
        `sandbox ${id} did not end`,
        async () => (await api("GET", `/v1/sandboxes/${id}`)).body.status,
        (s) => ENDED.includes(s),
      );

    beforeAll(async () => {
      nets = createFleetNets(2);
      const listen = nets.nets[0]?.hostAddress ?? "";
      s3 = await startS3("sandtree-fleet-volumes", listen);
      const blob = `s3://${s3.bucket}/fv?endpoint=${s3.endpoint}&region=us-east-1`;
      cpEnv = { SANDTREE_HEARTBEAT_INTERVAL_MS: "1000", ...AWS };
      cpArgs = ["--blob-store", blob];
      cp = await startControlPlane(mkdir("cp"), { listen, args: cpArgs, env: cpEnv });
      const key = cp.key;
      api = jsonApi(cp.url, () => key);
      expect((await api("POST", "/v1/hosts/local/cordon")).status).toBe(200);
      const token = readFileSync(path.join(cp.dir, "join-token"), "utf8").trim();
      for (const [i, net] of nets.nets.entries()) {
        const name = ["wa", "wb"][i] ?? `w${i}`;
        workers.push(
          await startWorkerIn(net.ns, {
            joinUrls: [cp.url],
            token,
            name,
            dir: mkdir(name),
            listen: `${net.address}:0`,
            // Sandbox networks (and so NFS-Ganesha) on: inside its namespace the worker's bridge touches nobody's.
            env: { SANDTREE_NETWORK: "on", ...AWS },
          }),
        );
      }
    }, 600_000);

    afterAll(async () => {
      for (const w of workers) w.proc.kill("SIGCONT");
      for (const w of workers) await stopChildProcess(w.proc, "SIGTERM");
      await stopChildProcess(cp?.proc ?? null, "SIGTERM");
      nets?.destroy();
      await s3?.close();
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    }, 120_000);

    it("a sandbox on another worker mounts a volume after it moved through the object store and reads its files", async () => {
      const made = await api("POST", "/v1/volumes", { name: "moving", size_gb: 1 });
      expect(made.status, JSON.stringify(made.body)).toBe(201);
      const vol = made.body.id as string;
      const put = await api(
        "PUT",
        `/v1/volumes/${vol}/files?path=/from-api.txt`,
        new TextEncoder().encode("written through the API\n"),
      );
      expect(put.status, JSON.stringify(put.body)).toBe(200);
      const mount = { volumes: [{ volume: "moving", path: "/data" }] };

      // On wa: the volume moves there from the control plane's host.
      const a = await api("POST", "/v1/sandboxes", { ...SMALL, ...mount, host: "wa" });
      expect(a.status, JSON.stringify(a.body)).toBe(201);
      await waitRunning(api, a.body.id, { context });
      const wrote = await sh(a.body.id, "cat /data/from-api.txt && mkdir -p /data/d && echo from-wa > /data/d/a.txt && sync");
      expect([wrote.exit_code, wrote.stdout], wrote.stderr).toEqual([0, "written through the API\n"]);

      // Mounted on wa: it cannot move to wb, and the file API cannot bring it home.
      const refused = await api("POST", "/v1/sandboxes", { ...SMALL, ...mount, host: "wb" });
      expect([refused.status, refused.body.code], JSON.stringify(refused.body)).toEqual([409, "VOLUME_IN_USE_ELSEWHERE"]);
      expect(refused.body.details.sandboxes).toEqual([a.body.id]);
      const busy = await api("GET", `/v1/volumes/${vol}/files/list?path=/`);
      expect([busy.status, busy.body.code]).toEqual([409, "VOLUME_IN_USE_ELSEWHERE"]);

      // wa's sandbox gone: on wb the volume moves from wa, with wa's files.
      expect((await api("DELETE", `/v1/sandboxes/${a.body.id}`)).status).toBe(200);
      await ended(a.body.id);
      const b = await api("POST", "/v1/sandboxes", { ...SMALL, ...mount, host: "wb" });
      expect(b.status, JSON.stringify(b.body)).toBe(201);
      await waitRunning(api, b.body.id, { context });
      const read = await sh(b.body.id, "cat /data/d/a.txt /data/from-api.txt && echo from-wb > /data/b.txt");
      expect([read.exit_code, read.stdout], read.stderr).toEqual([0, "from-wa\nwritten through the API\n"]);
      expect((await api("GET", `/v1/volumes/${vol}`)).body).toMatchObject({ status: "READY", mounted_by: [b.body.id] });

      expect((await api("DELETE", `/v1/sandboxes/${b.body.id}`)).status).toBe(200);
      await ended(b.body.id);

      // A control plane killed -9 right after it recorded a move (wb -> wa: MOVING in its store)
      // finishes the move at its next start.
      const old = cp as ControlPlane;
      await stopChildProcess(old.proc, "SIGKILL");
      const db = new Database(path.join(old.dir, "sandtree.db"));
      try {
        const wa = db.prepare("SELECT id FROM hosts WHERE name = 'wa'").get() as { id: string };
        db.prepare("UPDATE volumes SET status = 'MOVING', move_to = ? WHERE id = ?").run(wa.id, vol);
      } finally {
        db.close();
      }
      const port = new URL(old.url).port;
      cp = await startControlPlane(old.dir, { listen: new URL(old.url).hostname, args: [...cpArgs, "--port", port], env: cpEnv });
      expect(cp.url).toBe(old.url);
      expect((await api("GET", `/v1/volumes/${vol}`)).body).toMatchObject({ status: "READY", mounted_by: [] });
      expect(volumeOn("wa", vol)).toBe("READY");
      expect(volumeOn("wb", vol)).toBe("DELETED");

      // The file API brings the volume home to the control plane's host (from wa) and reads it.
      const got = await api("GET", `/v1/volumes/${vol}/files?path=/b.txt`);
      expect([got.status, got.body]).toEqual([200, "from-wb\n"]);
      expect((await api("DELETE", `/v1/volumes/${vol}`)).status).toBe(204);
    }, 600_000);

    it("a lost worker's volume comes back on another worker from its last sync", async () => {
      let syncedId = "";
      const old = cp as ControlPlane;
      await stopChildProcess(old.proc, "SIGTERM");
      const port = new URL(old.url).port;
      const env = { ...cpEnv, SANDTREE_HOST_LOST_AFTER_MS: "6000", SANDTREE_VOLUME_SYNC_S: "2" };
      const restartedAt = Date.now();
      cp = await startControlPlane(old.dir, { listen: new URL(old.url).hostname, args: [...cpArgs, "--port", port], env });
      // ACTIVE alone is the state from before the restart: a create is placed only on a host whose
      // heartbeat is fresh (within the 6 s above), so wait for a beat the new process received.
      const hostStates = async () =>
        Object.fromEntries(
          ((await api("GET", "/v1/hosts")).body.hosts as Array<{ name: string; state: string; last_heartbeat_at: string }>).map(
            (h) => [h.name, h.state === "ACTIVE" && Date.parse(h.last_heartbeat_at) >= restartedAt ? "BEATING" : h.state],
          ),
        );
      await until(
        "workers not ACTIVE and heartbeating after the restart",
        hostStates,
        (h) => h.wa === "BEATING" && h.wb === "BEATING",
      );

      const made = await api("POST", "/v1/volumes", { name: "synced", size_gb: 1 });
      expect(made.status).toBe(201);
      syncedId = made.body.id;
      const mount = { volumes: [{ volume: "synced", path: "/data" }] };
      const a = await api("POST", "/v1/sandboxes", { ...SMALL, ...mount, host: "wa" });
      expect(a.status, JSON.stringify(a.body)).toBe(201);
      await waitRunning(api, a.body.id, { context });
      const wrote = await sh(a.body.id, "mkdir -p /data/d && echo kept > /data/d/s.txt && sync");
      expect(wrote.exit_code, wrote.stderr).toBe(0);
      // A sync (a snapshot of the mounted volume) taken after the write.
      const after = new Date().toISOString();
      const synced = await until(
        "no sync after the write",
        async () => (await api("GET", "/v1/volumes/synced")).body,
        (v) => typeof v.synced_at === "string" && v.synced_at > after && v.synced_bytes > 0,
        { ms: 120_000 },
      );

      const wa = workers.find((w) => w.name === "wa") as Worker;
      wa.proc.kill("SIGSTOP");
      try {
        await until("wa not LOST", hostStates, (h) => h.wa === "LOST", { ms: 120_000 });
        await until(
          "the volume not marked",
          async () => (await api("GET", "/v1/volumes/synced")).body,
          (v) => v.home_lost_at !== null,
        );
        const b = await api("POST", "/v1/sandboxes", { ...SMALL, ...mount, host: "wb" });
        expect(b.status, JSON.stringify(b.body)).toBe(201);
        await waitRunning(api, b.body.id, { context });
        const read = await sh(b.body.id, "cat /data/d/s.txt");
        expect([read.exit_code, read.stdout], read.stderr).toEqual([0, "kept\n"]);
        const v = (await api("GET", "/v1/volumes/synced")).body;
        expect(v).toMatchObject({ status: "READY", home_lost_at: null, mounted_by: [b.body.id] });
        expect(v.restored_as_of >= synced.synced_at, JSON.stringify(v)).toBe(true);
        expect((await api("DELETE", `/v1/sandboxes/${b.body.id}`)).status).toBe(200);
        await ended(b.body.id);
      } finally {
        wa.proc.kill("SIGCONT");
      }
      // wa is back: its sandbox is ended there and its stale copy of the volume dropped (never served again).
      await until(
        "wa's stale copy not dropped",
        async () => volumeOn("wa", syncedId),
        (s) => s === "DELETED",
        { ms: 120_000 },
      );
      expect((await api("DELETE", "/v1/volumes/synced")).status).toBe(204);
    }, 600_000);
  },
);
