import { existsSync, readdirSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { serverForFile } from "./helpers.js";

const t = serverForFile();

const run = async (id: string, command: string) => {
  const r = await t.api("POST", `/v1/sandboxes/${id}/exec`, { command });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body as { stdout: string; stderr: string; exit_code: number };
};

/** A busybox sandbox of `memoryGb` RUNNING `counter` as a job, its count past `floor`: its id and team. */
const countingSandbox = async (memoryGb: number, counter: string, floor: number) => {
  const p = await t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", memory_gb: memoryGb, disk_size_gb: 1 });
  const parent = p.body.id as string;
  await t.waitRunning(parent);
  await t.api("POST", `/v1/sandboxes/${parent}/jobs`, { command: counter });
  await countAbove(parent, floor);
  return { parent, teamId: p.body.team_id as string };
};

/** The counter a guest shell writes with `echo $i > /tmp/count`: read again when the read fell between truncate and write. */
const readCount = async (id: string): Promise<number> => {
  for (let i = 0; ; i++) {
    const out = (await run(id, "cat /tmp/count")).stdout.trim();
    if (out !== "" || i >= 20) return Number(out);
    await new Promise((r) => setTimeout(r, 50));
  }
};

/** The count once it is past `floor`, or the last one read after `timeoutMs` (the caller's expect says which). */
const countAbove = async (id: string, floor: number, timeoutMs = 30_000): Promise<number> => {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const n = await readCount(id);
    if (n > floor || Date.now() > deadline) return n;
    await new Promise((r) => setTimeout(r, 250));
  }
};

describe("memory forks", () => {
  it("starts N children that continue the parent's in-memory count, each with its own RNG and the host clock", {
    timeout: 400_000,
  }, async () => {
    // The count lives in the shell's memory; the file only reports it.
    const { parent, teamId } = await countingSandbox(
      0.25,
      "i=0; while true; do i=$((i+1)); echo $i > /tmp/count; sleep 0.1; done",
      0,
    );
    const atFork = await readCount(parent);
    const forked = await t.api("POST", `/v1/sandboxes/${parent}/fork`, { memory: true, count: 3 });
    expect(forked.status, JSON.stringify(forked.body)).toBe(201);
    expect(forked.body.sandboxes).toHaveLength(3);
    const ck = await t.api("GET", `/v1/checkpoints/${forked.body.checkpoint_id}`);
    expect(ck.body.has_memory).toBe(true);
    const children = await Promise.all(forked.body.sandboxes.map((s: { id: string }) => t.waitRunning(s.id)));
    const randoms = new Set<string>();
    for (const child of children) {
      expect(child.start_path).toBe("memory");
      const c1 = await readCount(child.id);
      const c2 = await countAbove(child.id, c1);
      // It continues from the fork point: never restarted from 1, and still counting.
      expect(c1).toBeGreaterThanOrEqual(atFork);
      expect(c2).toBeGreaterThan(c1);
      randoms.add((await run(child.id, "head -c 16 /dev/urandom | od -An -tx1")).stdout);
      // Programs inside can tell they were restored (and reseed their own generators).
      expect(Number((await run(child.id, "cat /run/sandtree/generation")).stdout)).toBeGreaterThanOrEqual(1);
      // The guest's clock, bracketed by the host's around the exec (its latency under load is
      // not the guest's error); a clock not set on restore would lag by the snapshot's age.
      const before = Date.now() / 1000;
      const now = Number((await run(child.id, "date +%s")).stdout.trim());
      const after = Date.now() / 1000;
      expect(now).toBeGreaterThanOrEqual(Math.floor(before) - 1);
      expect(now).toBeLessThanOrEqual(Math.ceil(after) + 1);
    }
    expect(randoms.size).toBe(3);
    // The parent went on too.
    expect(await readCount(parent)).toBeGreaterThan(atFork);

    // A second memory checkpoint of the same VM works (the first left it running, not postmigrate).
    const again = await t.api("POST", `/v1/sandboxes/${parent}/checkpoints`, { include_memory: true });
    expect(again.status, JSON.stringify(again.body)).toBe(201);
    await t.server.services.checkpoints.waitDurable(teamId, again.body.id, 60_000);
    const c3 = await readCount(parent);
    expect(await countAbove(parent, c3)).toBeGreaterThan(c3);

    const noMem = await t.api("POST", `/v1/sandboxes/${parent}/checkpoints`, {});
    await t.server.services.checkpoints.waitDurable(teamId, noMem.body.id, 60_000);
    const refused = await t.api("POST", "/v1/sandboxes", { checkpoint_id: noMem.body.id, restore_memory: true });
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe("CHECKPOINT_HAS_NO_MEMORY");
    for (const s of [parent, ...children.map((c) => c.id)]) await t.api("DELETE", `/v1/sandboxes/${s}`);
  });
});

describe("copy-on-write memory forks", () => {
  it("16 children of one checkpoint map its RAM file: each continues the count, each its own RNG", {
    timeout: 400_000,
  }, async () => {
    // The count lives in the shell's memory (one fork a second: 16 copies stay light under TCG).
    const { parent } = await countingSandbox(
      0.125,
      "i=1000; while true; do i=$((i+1)); echo $i > /tmp/count; sleep 1; done",
      1000,
    );
    const atFork = await readCount(parent);
    expect(atFork).toBeGreaterThan(1000);
    const images = path.join(t.dataDir, "memory-images");
    const imageCount = () =>
      existsSync(images) ? readdirSync(images).filter((k) => existsSync(path.join(images, k, "image.json"))).length : 0;
    const imagesBefore = imageCount();
    const forked = await t.api("POST", `/v1/sandboxes/${parent}/fork`, { memory: true, count: 16 });
    expect(forked.status, JSON.stringify(forked.body)).toBe(201);
    const ids = (forked.body.sandboxes as Array<{ id: string }>).map((s) => s.id);
    expect(ids).toHaveLength(16);
    const children = await Promise.all(ids.map((id) => t.waitRunning(id)));
    for (const c of children) expect(c.start_path).toBe("memory");
    // One RAM file for the checkpoint, mapped by every child (not 16 loads of its stream).
    expect(imageCount()).toBe(imagesBefore + 1);
    const counts = async () => Promise.all(ids.map(readCount));
    const first = await counts();
    const later = await Promise.all(ids.map((id, i) => countAbove(id, first[i] ?? 0)));
    ids.forEach((_, i) => {
      // From the fork point on (never from 1000 again), and still counting on its own.
      expect(first[i]).toBeGreaterThanOrEqual(atFork);
      expect(later[i]).toBeGreaterThan(first[i] ?? 0);
    });
    const randoms = await Promise.all(ids.map(async (id) => (await run(id, "head -c 16 /dev/urandom | od -An -tx1")).stdout));
    expect(new Set(randoms).size).toBe(16);
    await Promise.all([parent, ...ids].map((id) => t.api("DELETE", `/v1/sandboxes/${id}`)));
  });
});

// A seeded SQLite service (python3's sqlite3 behind a small HTTP server) that episodes mutate.
const SERVICE = `
import hashlib, http.server, os, random, sqlite3, time
db = sqlite3.connect("/root/ledger.db", check_same_thread=False)
db.execute("CREATE TABLE IF NOT EXISTS ledger (id INTEGER PRIMARY KEY, who TEXT, amount INTEGER)")
if db.execute("SELECT COUNT(*) FROM ledger").fetchone()[0] == 0:
    rng = random.Random(42)
    db.executemany("INSERT INTO ledger (who, amount) VALUES (?, ?)", [(f"user{i}", rng.randint(1, 1000)) for i in range(200)])
    db.commit()
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        if self.path == "/dump":
            body = hashlib.sha256("\\n".join(db.iterdump()).encode()).hexdigest()
        elif self.path == "/mutate":
            db.execute("INSERT INTO ledger (who, amount) VALUES (?, ?)", ("episode", random.randint(1, 10**9)))
            db.execute("UPDATE ledger SET amount = amount + 1 WHERE id = ?", (random.randint(1, 200),))
            db.commit()
            body = "ok"
        else:
            body = str(os.getpid())
        self.send_response(200); self.end_headers(); self.wfile.write(body.encode())
http.server.HTTPServer(("127.0.0.1", 8080), H).serve_forever()
`;

describe("episode reset in place", () => {
  it("puts a Debian sandbox with a live SQLite service back to the same state 20 times", { timeout: 900_000 }, async () => {
    const r = await t.api("POST", "/v1/sandboxes", { image: "sandtree/debian", memory_gb: 0.375, disk_size_gb: 2 });
    const id = r.body.id as string;
    await t.waitRunning(id);
    await t.api("PUT", `/v1/sandboxes/${id}/files?path=/root/service.py`, new TextEncoder().encode(SERVICE), {
      "content-type": "application/octet-stream",
    });
    await t.api("POST", `/v1/sandboxes/${id}/jobs`, { command: "exec python3 /root/service.py" });
    // The service's answers to `paths` in order, one line each, from one exec (a python3 start
    // costs about a second under TCG), then `then`'s output.
    const get = async (paths: string[], then = "") =>
      (
        await run(
          id,
          `python3 -c "import urllib.request,sys; [print(urllib.request.urlopen('http://127.0.0.1:8080'+p).read().decode()) for p in sys.argv[1:]]" ${paths.join(" ")}${then}`,
        )
      ).stdout.split("\n");
    let pid = "";
    for (let i = 0; i < 100 && !/^\d+$/.test(pid); i++) {
      pid = (await get(["/pid"]).catch(() => [""]))[0] ?? "";
      if (!/^\d+$/.test(pid)) await new Promise((res) => setTimeout(res, 300));
    }
    expect(pid).toMatch(/^\d+$/);
    // The database's hash, the service's pid and its start time (in clock ticks since boot).
    const state = async () => get(["/dump", "/pid"], ` && cut -d' ' -f22 /proc/${pid}/stat`);
    const [seededHash, , seededStart] = await state();
    expect(seededHash).toMatch(/^[0-9a-f]{64}$/);
    const ck = await t.api("POST", `/v1/sandboxes/${id}/checkpoints`, { include_memory: true });
    expect(ck.status, JSON.stringify(ck.body)).toBe(201);
    await t.server.services.checkpoints.waitDurable(r.body.team_id, ck.body.id, 120_000);

    for (let episode = 0; episode < 20; episode++) {
      const [hash, servicePid, start] = await state();
      expect(hash, `episode ${episode} starts from the seeded state`).toBe(seededHash);
      expect(servicePid).toBe(pid);
      expect(start).toBe(seededStart);
      expect((await get(["/mutate", "/dump"]))[1]).not.toBe(seededHash);
      const reset = await t.api("POST", `/v1/sandboxes/${id}/reset`, { checkpoint_id: ck.body.id });
      expect(reset.status, JSON.stringify(reset.body)).toBe(200);
      expect(reset.body.id).toBe(id);
      expect(reset.body.status).toBe("RUNNING");
    }
    await t.api("DELETE", `/v1/sandboxes/${id}`);
  });
});
