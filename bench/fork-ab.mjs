#!/usr/bin/env node
// Forks and restores of this checkout against another build of sandtree (--base DIR: a built
// checkout, e.g. a worktree of main), both servers in this one process and measured in turns
// (the order swapped every round), so a loaded machine weighs on both alike. Each round writes
// --dirty-mib of fresh data into the parent first (the layer a checkpoint has to seal), then:
//   fs_fork_answer     POST fork -> the call answered (the child exists)
//   fs_fork            POST fork -> the child's first output
//   checkpoint_restore POST checkpoints -> a create from it -> first output (as a client must:
//                      a build that refuses a FROZEN checkpoint is waited for until DURABLE first)
//   memory_fork        fork with memory of --children children -> every child answered
// Medians per build, beside the floor (../shared/bench/raw-floor.py, same run).
// Usage: node bench/fork-ab.mjs --base ../main [--rounds 5] [--children 4] [--dirty-mib 16].
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { detectAccel } from "@sandtree/host";
import { measureFloor } from "./lib/floor.mjs";
import { templatesBuilt } from "./lib/templates.mjs";

const { values } = parseArgs({
  options: {
    base: { type: "string" },
    rounds: { type: "string", default: "5" },
    children: { type: "string", default: "4" },
    "dirty-mib": { type: "string", default: "16" },
  },
});
if (!values.base) throw new Error("--base DIR: a built checkout of sandtree to compare with");
const ROUNDS = Number(values.rounds);
const CHILDREN = Number(values.children);
const DIRTY = Number(values["dirty-mib"]);
const SPEC = { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 };
const since = (t0) => performance.now() - t0;
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? +s[Math.floor(s.length / 2)].toFixed(1) : null;
};

/** One build's server (its own modules, from its checkout) with a running parent. */
async function side(name, root) {
  const load = (pkg) => import(pathToFileURL(path.join(root, "packages", pkg, "dist", "index.js")).href);
  const { startServer } = await load("server");
  const { SandtreeClient } = await load("sdk");
  const work = mkdtempSync(path.join(tmpdir(), `sandtree-bench-ab-${name}-`));
  const dataDir = path.join(work, "data");
  const server = await startServer({ dataDir, port: 0, logger: false, warmTemplates: true });
  const client = new SandtreeClient({ apiUrl: server.url, apiKey: server.firstKey });
  const ready = async (id) => {
    await client.sandboxes.waitForCreation(id, { intervalMs: 10, timeoutMs: 600_000 });
    await client.sandboxes.run(id, ["echo", "ready"]);
  };
  const seed = await client.sandboxes.create(SPEC);
  await ready(seed.id);
  await templatesBuilt(dataDir);
  const figures = { fs_fork_answer: [], fs_fork: [], checkpoint_restore: [], memory_fork: [], frozen_at_answer: 0 };
  const dirty = () =>
    client.sandboxes.run(seed.id, ["sh", "-c", `head -c ${DIRTY * 1048576} /dev/urandom > /root/dirty && sync`]);
  return {
    name,
    figures,
    async round() {
      await dirty();
      let t0 = performance.now();
      const child = await client.sandboxes.fork(seed.id);
      figures.fs_fork_answer.push(since(t0));
      const ck = await client.checkpoints.get(child.source_checkpoint_id);
      if (ck.state === "FROZEN") figures.frozen_at_answer++;
      await ready(child.id);
      figures.fs_fork.push(since(t0));
      await client.sandboxes.delete(child.id);

      await dirty();
      t0 = performance.now();
      let c = await client.checkpoints.create(seed.id);
      let restored;
      try {
        restored = await client.sandboxes.create({ checkpoint_id: c.id, memory_gb: 0.25 });
      } catch (err) {
        if (err?.code !== "CHECKPOINT_NOT_READY") throw err;
        c = await client.checkpoints.waitForCheckpoint(c.id);
        restored = await client.sandboxes.create({ checkpoint_id: c.id, memory_gb: 0.25 });
      }
      await ready(restored.id);
      figures.checkpoint_restore.push(since(t0));
      await client.sandboxes.delete(restored.id);

      await dirty();
      t0 = performance.now();
      const { sandboxes } = await client.sandboxes.forkMany(seed.id, CHILDREN, { memory: true });
      await Promise.all(sandboxes.map((s) => ready(s.id)));
      figures.memory_fork.push(since(t0));
      await client.sandboxes.bulkDelete({ ids: sandboxes.map((s) => s.id) });
    },
    async close() {
      await client.sandboxes.delete(seed.id).catch(() => {});
      await server.close();
      rmSync(work, { recursive: true, force: true });
    },
  };
}

const accel = await detectAccel("auto");
const floor = await measureFloor(accel);
const sides = [await side("base", path.resolve(values.base)), await side("new", path.resolve("."))];
const errors = [];
try {
  for (let r = 0; r < ROUNDS; r++) {
    for (const s of r % 2 === 0 ? sides : [...sides].reverse()) {
      await s.round().catch((err) => errors.push(`${s.name} round ${r}: ${String(err?.message ?? err).slice(0, 300)}`));
    }
    console.error(`round ${r + 1}/${ROUNDS} done`);
  }
} finally {
  for (const s of sides) await s.close().catch(() => {});
}
const out = { bench: "fork-ab", accel, rounds: ROUNDS, children: CHILDREN, dirty_mib: DIRTY, floor, errors };
for (const s of sides) {
  const f = s.figures;
  out[s.name] = {
    fs_fork_answer_ms: median(f.fs_fork_answer),
    fs_fork_ms: median(f.fs_fork),
    checkpoint_restore_ms: median(f.checkpoint_restore),
    memory_fork_all_answered_ms: median(f.memory_fork),
    frozen_at_fork_answer: `${f.frozen_at_answer}/${f.fs_fork.length}`,
    samples: Object.fromEntries(
      Object.entries(f)
        .filter(([, v]) => Array.isArray(v))
        .map(([k, v]) => [k, v.map((x) => Math.round(x))]),
    ),
  };
}
console.log(JSON.stringify(out, null, 2));
