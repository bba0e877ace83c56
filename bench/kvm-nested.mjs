#!/usr/bin/env node
// The KVM path's figures, as ratios to bare QEMU measured in the same run. Every KVM figure is
// NESTED: an L2 guest under KVM inside an L1 sandbox whose CPU is emulated by TCG (the build
// machines' own KVM cannot run guests), so absolute times are far from a KVM host's; the ratios
// to the floor measured in the same place are what carry over.
//   nested_kvm: inside a sandbox with nested_virtualization, raw-floor.py under RAW_ACCEL=kvm (the
//     floor: bare cold boot and copy-on-write clone), then scripts/kvm/inner-suite.mjs (a sandtree
//     server there under -accel kvm: cold create, warm create, filesystem fork, memory fork of 4).
//   tuning: bench/kvm-tuning.py there: the PIT kept or dropped and the TCG command-line flags
//     under KVM (cold boot and idle CPU of bare QEMU).
//   tcg: the same inner suite and raw-floor.py on this host under TCG, for the same ratios.
// Usage: node bench/kvm-nested.mjs [--parts suite,tcg,tuning]   (root, after setup and
// `npm run build`; ~30-40 min at load 15-25 on the 2-core build machine). The part `warm` in
// place of `suite` runs the inner suite only to its warm creates (INNER_WARM_RUNS of them, 3 by
// default; their median and each one's server events are reported), on both sides. SANDTREE_FLOOR_SCRIPT
// names raw-floor.py where it is not ../shared/bench beside the checkout.
// Prints one JSON object.
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { SandtreeClient } from "@sandtree/sdk";
import { startServer } from "@sandtree/server";
import { floorScript, measureFloor, privateFloor, ratio } from "./lib/floor.mjs";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const work = mkdtempSync(path.join(tmpdir(), "sandtree-bench-kvm-"));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const load = () => loadavg().map((x) => +x.toFixed(1));
// What to run (all by default): --parts suite,tcg,tuning (the floor always runs).
const PARTS = new Set(
  (process.argv.includes("--parts") ? process.argv[process.argv.indexOf("--parts") + 1] : "suite,tcg,tuning").split(","),
);
// Only the warm create (and the cold create before it) of the inner suite, each side.
const UNTIL_WARM = PARTS.has("warm") && !PARTS.has("suite");
const WARM_RUNS = process.env.INNER_WARM_RUNS ?? "3";
// The inner suite's budget (its default, 22 minutes, fits the test): a bench's runs take longer.
const BUDGET_MS = process.env.INNER_BUDGET_MS ?? String(120 * 60_000);
const suiteArgs = UNTIL_WARM ? ["--until-warm"] : [];
const rawBase = process.env.RAW_WORK ?? path.join(tmpdir(), "raw-baseline");

/** Runs the inner suite here (TCG) as a direct child and returns its report. */
function suiteHere() {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(repo, "scripts/kvm/inner-suite.mjs"), ...suiteArgs], {
      env: {
        ...process.env,
        INNER_ACCEL: "tcg",
        INNER_WARM_RUNS: WARM_RUNS,
        INNER_BUDGET_MS: BUDGET_MS,
        INNER_PORT: String(20_000 + Math.floor(Math.random() * 20_000)),
      },
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    child.stdout.on("data", (b) => (out += b));
    child.on("close", () => {
      try {
        resolve(JSON.parse(out.trim().split("\n").at(-1)));
      } catch {
        resolve({ error: out.slice(-1000) });
      }
    });
  });
}

/** The figures of a suite report: each step's own timing detail. */
function figures(report) {
  const d = (name) => report.steps?.find((s) => s.name === name)?.detail;
  return {
    ok: report.steps?.every((s) => s.ok) ?? false,
    cold_create_ms: d("cold create and exec")?.create_ms ?? null,
    warm_create_ms: d("warm create from a template")?.create_ms ?? null,
    // Each warm create: ms to RUNNING, and the server's events (ms after the create call).
    warm_runs: d("warm create from a template")?.runs ?? null,
    fs_fork_ms: d("filesystem checkpoint and fork")?.fork_ms ?? null,
    memory_fork_4_ms: d("memory fork into 4: distinct random bytes, correct clocks")?.fork_ms ?? null,
    failed: report.steps?.filter((s) => !s.ok).map((s) => ({ step: s.name, ms: s.ms, detail: s.detail })) ?? [report.error],
  };
}

function ratios(f, floor) {
  const cold = floor.raw_cold_boot_to_first_command_s * 1000;
  const clone = floor.raw_cow_clone_to_first_command_s * 1000;
  return {
    cold_create_over_floor_cold_boot: ratio(f.cold_create_ms, cold),
    warm_create_over_floor_clone: ratio(f.warm_create_ms, clone),
    fs_fork_over_floor_cold_boot: ratio(f.fs_fork_ms, cold),
    memory_fork_4_over_floor_clone: ratio(f.memory_fork_4_ms, clone),
  };
}

async function nested() {
  const server = await startServer({
    dataDir: path.join(work, "data"),
    host: "127.0.0.1",
    port: 0,
    logger: false,
    network: "off",
  });
  const client = new SandtreeClient({ apiUrl: server.url, apiKey: server.firstKey ?? "", timeoutMs: 0 });
  try {
    const bundle = path.join(work, "bundle.tar");
    const rawWork = rawBase;
    execFileSync(process.execPath, [path.join(repo, "scripts/kvm/bundle.mjs"), bundle], { stdio: "ignore" });
    const sb = await client.sandboxes.create({
      image: "sandtree/debian",
      memory_gb: 3,
      cpu_cores: 2,
      disk_size_gb: 6,
      nested_virtualization: true,
      timeout_minutes: 90,
    });
    await client.sandboxes.waitForCreation(sb.id, { timeoutMs: 600_000 });
    await client.files.upload(sb.id, bundle, "/root/bundle.tar");
    await client.files.upload(sb.id, floorScript(), "/opt/raw/raw-floor.py");
    await client.files.upload(sb.id, path.join(repo, "bench/kvm-tuning.py"), "/opt/raw/kvm-tuning.py");
    await client.files.upload(sb.id, path.join(repo, "bench/lib/raw_qemu.py"), "/opt/raw/lib/raw_qemu.py");
    const kernel = execFileSync("sh", ["-c", `ls ${rawWork}/x/boot/vmlinuz-*`], { encoding: "utf8" }).trim();
    await client.files.upload(sb.id, kernel, `/opt/raw/x/boot/${path.basename(kernel)}`);
    await client.files.upload(sb.id, path.join(rawWork, "initrd.gz"), "/opt/raw/initrd.gz");
    const job = async (command) => {
      const j = await client.sandboxes.jobs.start(sb.id, command);
      for (;;) {
        const s = await client.sandboxes.jobs.get(sb.id, j.job_id);
        if (s.status === "RUNNING") {
          await sleep(5000);
          continue;
        }
        const last = s.stdout_tail.trim().split("\n").at(-1);
        if (!last?.startsWith("{")) {
          const box = await client.sandboxes.get(sb.id).catch((e) => ({ status: String(e) }));
          throw new Error(
            `${command}: ${s.status} (${s.error_reason}; sandbox ${box.status} ${box.error_reason ?? ""}): ${s.stdout_tail.slice(-1500)} ${s.stderr_tail.slice(-1500)}`,
          );
        }
        return last;
      }
    };
    await job("tar -C / --keep-directory-symlink -xf /root/bundle.tar && rm /root/bundle.tar && echo {}");
    // `--parts ...,nofloor` leaves the nested floor out (~20 min at load 30): its ratios are then null.
    const floor = PARTS.has("nofloor")
      ? {}
      : JSON.parse(await job("RAW_ACCEL=kvm RAW_WORK=/opt/raw python3 /opt/raw/raw-floor.py"));
    const tuning = PARTS.has("tuning")
      ? JSON.parse(await job("RAW_ACCEL=kvm RAW_WORK=/opt/raw python3 /opt/raw/kvm-tuning.py"))
      : null;
    const report =
      PARTS.has("suite") || UNTIL_WARM
        ? JSON.parse(
            await job(
              `cd /opt/sandtree && INNER_WARM_RUNS=${WARM_RUNS} INNER_BUDGET_MS=${BUDGET_MS} node inner-suite.mjs ${suiteArgs.join(" ")}`,
            ),
          )
        : { steps: [] };
    return { floor, tuning, report };
  } finally {
    await server.close();
  }
}

const out = { load_before: load(), note: "nested_kvm: L2 under KVM inside an L1 under TCG; compare ratios, not times" };
try {
  privateFloor(work);
  const inner = await nested();
  const nf = figures(inner.report);
  out.nested_kvm = {
    floor: inner.floor,
    sandtree: nf,
    ratios: ratios(nf, inner.floor),
    accel: inner.report.accel,
    ...(inner.tuning ? { tuning: inner.tuning } : {}),
  };
  if (PARTS.has("tcg")) {
    const floor = await measureFloor("tcg");
    const tf = figures(await suiteHere());
    out.tcg = { floor, sandtree: tf, ratios: ratios(tf, floor) };
  }
} catch (err) {
  out.error = String(err?.stack ?? err);
} finally {
  // Kept after a failure: the outer sandbox's console and logs are under data/sandboxes.
  if (out.error) out.kept = work;
  else rmSync(work, { recursive: true, force: true });
}
out.load_after = load();
console.log(JSON.stringify(out, null, 2));
