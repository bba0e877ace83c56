import { appendFileSync, readFileSync } from "node:fs";
import path from "node:path";
import { cacheDir } from "@sandtree/host";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./helpers.js";

// One sandtree/docker sandbox (dockerd brought up by the image's start command) runs the
// fidelity suite (scripts/fidelity/suite.py, the same one docs/fidelity.md reports), then is
// forked with its memory (a running container goes on in each child) and by its files (the
// child starts dockerd again and runs the images the parent loaded). TCG is slow for Docker:
// deadlines are generous, and nothing here asserts a time.
const SUITE = path.resolve(path.dirname(new URL(import.meta.url).pathname), "../../../scripts/fidelity/suite.py");
const TARBALL = path.join(cacheDir(), "fixtures", "hello-docker.tar");
const CHECKS = [
  "overlayfs",
  "netns-veth",
  "nftables",
  "cgroup-oom",
  "userns",
  "fuse",
  "dockerd",
  "docker-load",
  "docker-run",
  "docker-port",
  "docker-build",
  "nohup-service",
];

// `node scripts/fidelity-report.mjs` sets this and renders docs/fidelity.md from what is written.
const OUT = process.env.SANDTREE_FIDELITY_OUT;
const record = (line: object) => {
  if (OUT) appendFileSync(path.join(OUT, "results.jsonl"), `${JSON.stringify(line)}\n`);
};

let t: TestServer;
let parent: string;
beforeAll(async () => {
  t = await startTestServer();
  const r = await t.api("POST", "/v1/sandboxes", {
    image: "sandtree/docker",
    memory_gb: 1,
    disk_size_gb: 4,
  });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  parent = r.body.id as string;
  // No start command asked: the image's own (label sandtree.start-command) starts dockerd.
  expect((await t.waitRunning(parent)).start_command).toBe("start-dockerd");
  for (const [file, dst] of [
    [SUITE, "/opt/fidelity/suite.py"],
    [TARBALL, "/opt/fidelity/hello-docker.tar"],
  ] as const) {
    const up = await t.api("PUT", `/v1/sandboxes/${parent}/files?path=${dst}`, new Uint8Array(readFileSync(file)));
    expect(up.status, JSON.stringify(up.body)).toBe(200);
  }
}, 300_000);
afterAll(async () => {
  await t?.close();
});

const run = async (id: string, command: string, timeout_seconds = 600) => {
  const r = await t.api("POST", `/v1/sandboxes/${id}/exec`, { command, timeout_seconds });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body as { stdout: string; stderr: string; exit_code: number };
};
const ok = async (id: string, command: string) => {
  const r = await run(id, command);
  expect(r.exit_code, `${command}\n${r.stdout}${r.stderr}`).toBe(0);
  return r.stdout;
};

// Long commands run as jobs (polled), so no HTTP request waits minutes for its answer.
const job = async (id: string, command: string, timeoutMs = 900_000) => {
  const j = await t.api("POST", `/v1/sandboxes/${id}/jobs`, { command });
  expect(j.status, JSON.stringify(j.body)).toBe(201);
  const url = `/v1/sandboxes/${id}/jobs/${j.body.job_id}`;
  const deadline = Date.now() + timeoutMs;
  let body = j.body;
  while (body.status === "RUNNING") {
    if (Date.now() > deadline) throw new Error(`${command} still running after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 250));
    body = (await t.api("GET", url)).body;
  }
  const output = async (stream: string) => {
    const res = await fetch(`${t.url}${url}/output?stream=${stream}`, { headers: { authorization: `Bearer ${t.key}` } });
    return res.text();
  };
  return { exit_code: body.exit_code as number | null, stdout: await output("stdout"), stderr: await output("stderr") };
};

describe("sandtree/docker", () => {
  it("passes every check of the fidelity suite, each reported by name", { timeout: 900_000 }, async () => {
    // The service is started by one exec; the suite, a later exec, asks it.
    await ok(parent, "python3 /opt/fidelity/suite.py start-service");
    const r = await job(parent, "python3 /opt/fidelity/suite.py run --tar /opt/fidelity/hello-docker.tar");
    const lines = r.stdout
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as { check?: string; ok?: boolean; detail?: string; seconds?: number });
    for (const l of lines) record(l);
    const results = new Map(lines.filter((l) => l.check).map((l) => [l.check, l]));
    expect([...results.keys()], r.stderr).toEqual(CHECKS);
    for (const name of CHECKS) expect(results.get(name)?.ok, `${name}: ${results.get(name)?.detail}`).toBe(true);
    expect(r.exit_code).toBe(0);
  });

  it("keeps a running container running in each child of a memory fork", { timeout: 900_000 }, async () => {
    // The count is written aside and renamed, so a read never finds /n truncated between counts.
    await ok(
      parent,
      "docker run -d --name keeper sandtree/hello sh -c 'i=0; while true; do i=$((i+1)); echo $i > /n.t; mv /n.t /n; sleep 0.5; done'",
    );
    await ok(parent, 'until [ "$(docker exec keeper cat /n 2>/dev/null || echo 0)" -gt 0 ]; do sleep 0.5; done');
    const atFork = Number(await ok(parent, "docker exec keeper cat /n"));
    const t0 = performance.now();
    const forked = await t.api("POST", `/v1/sandboxes/${parent}/fork`, { memory: true, count: 2 });
    expect(forked.status, JSON.stringify(forked.body)).toBe(201);
    const children = (forked.body.sandboxes as { id: string }[]).map((s) => s.id);
    try {
      const started = await Promise.all(children.map((c) => t.waitRunning(c)));
      const seconds = (performance.now() - t0) / 1000;
      for (const [i, child] of children.entries()) {
        expect(started[i].start_path).toBe("memory");
        // The same container, still running: its counter goes on from where the fork caught it.
        expect(await ok(child, "docker inspect -f '{{.State.Running}}' keeper")).toBe("true\n");
        const a = Number(await ok(child, "docker exec keeper cat /n"));
        // Read again until it moved on (the counter ticks every 0.5 s; 30 s at most).
        const b = Number(
          await ok(
            child,
            `for i in $(seq 120); do [ "$(docker exec keeper cat /n)" -gt ${a} ] && break; sleep 0.25; done; docker exec keeper cat /n`,
          ),
        );
        expect(a).toBeGreaterThanOrEqual(atFork);
        expect(b).toBeGreaterThan(a);
      }
      record({
        check: "memory-fork-container",
        ok: true,
        seconds,
        detail: "fork call to 2 children RUNNING; in each the container kept running and counting",
        means:
          "a memory fork of a sandbox running dockerd and a container resumes both in every child: no restart, no lost state",
      });
    } finally {
      for (const child of children) await t.api("DELETE", `/v1/sandboxes/${child}`);
    }
  });

  it("starts dockerd again in a filesystem fork's child, which runs the parent's images", { timeout: 900_000 }, async () => {
    const t0 = performance.now();
    const forked = await t.api("POST", `/v1/sandboxes/${parent}/fork`, {});
    expect(forked.status, JSON.stringify(forked.body)).toBe(201);
    const child = forked.body.id as string;
    try {
      await t.waitRunning(child);
      const up = await job(child, "start-dockerd");
      expect(up.exit_code, up.stdout + up.stderr).toBe(0);
      const images = await ok(child, "docker images --format '{{.Repository}}:{{.Tag}}' | sort");
      expect(images).toContain("sandtree/hello:latest");
      expect(images).toContain("fid-built:latest");
      // A new container from an image the parent built (docker build in the suite).
      expect(await ok(child, "docker run --rm fid-built cat /built.txt")).toBe("built inside\n");
      record({
        check: "fs-fork-docker",
        ok: true,
        seconds: (performance.now() - t0) / 1000,
        detail: "fork, boot, start-dockerd, docker run of an image the parent built",
        means: "a filesystem fork keeps Docker's images and containers on disk; the child starts dockerd and runs them",
      });
    } finally {
      await t.api("DELETE", `/v1/sandboxes/${child}`);
    }
  });
});
