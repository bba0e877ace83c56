// The sandbox address pool as a second server on the host sees it: addresses on interfaces that
// are down (a killed server's taps) count, another live server's claim counts, and a create that
// asks for an egress list or a tunnel on a server without sandbox networks is refused, never
// accepted and silently dropped. Runs in a network namespace of its own (root, iproute2).
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serverForFile } from "./helpers.js";

const HOST_DIST = fileURLToPath(new URL("../../host/dist/index.js", import.meta.url));
const ns = `stpool${process.pid}`;
const scratch = mkdtempSync(path.join(tmpdir(), "sandtree-pool-"));
const claims = path.join(scratch, "claims");

/** Runs choosePool inside the test's namespace (a child process: a namespace is per process). */
function choose(opts: { configured?: string; dataDir: string; ownPrefix?: string; claimsDir?: string; release?: boolean }) {
  const script = `
    const { choosePool } = await import(${JSON.stringify(HOST_DIST)});
    const c = await choosePool(JSON.parse(process.argv[1]));
    if (${opts.release === true}) c.release();
    process.stdout.write(JSON.stringify({ subnet: c.subnet, reason: c.reason, skipped: c.skipped }));`;
  const args = {
    ...opts,
    ownPrefix: opts.ownPrefix ?? "stzzzz-",
    stateFile: path.join(opts.dataDir, "network-pool"),
    claimsDir: opts.claimsDir ?? claims,
  };
  const r = spawnSync("ip", ["netns", "exec", ns, process.execPath, "--input-type=module", "-e", script, JSON.stringify(args)], {
    encoding: "utf8",
  });
  if (r.status !== 0) throw new Error(`choosePool failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as { subnet: string | null; reason: string; skipped: string[] };
}

const ip = (...argv: string[]) => execFileSync("ip", ["netns", "exec", ns, "ip", ...argv], { encoding: "utf8" });
const dataDir = (name: string) => mkdtempSync(path.join(scratch, `${name}-`));

beforeAll(() => {
  execFileSync("ip", ["netns", "add", ns]);
  // What a server killed with -9 leaves: a tap that is down, still holding its /30.
  ip("tuntap", "add", "dev", "stdead-0", "mode", "tap");
  ip("addr", "add", "10.201.0.1/30", "dev", "stdead-0");
});
afterAll(() => {
  spawnSync("ip", ["netns", "del", ns]);
  rmSync(scratch, { recursive: true, force: true });
});

describe("address pool", () => {
  it("sees a down interface's address and takes the next free pool, remembering it", () => {
    expect(ip("-o", "link", "show", "stdead-0")).not.toMatch(/[<,]UP[,>]/);
    const dir = dataDir("a");
    const c = choose({ dataDir: dir });
    expect(c.subnet).toBe("10.202.0.0/16");
    expect(c.skipped.join("\n")).toMatch(
      /10\.201\.0\.0\/16 overlaps 10\.201\.0\.1\/30 .* on stdead-0 \(down\).*ip link del stdead-0/,
    );
    expect(readFileSync(path.join(dir, "network-pool"), "utf8").trim()).toBe("10.202.0.0/16");
  });

  it("refuses a configured pool that overlaps, saying what to remove", () => {
    const c = choose({ configured: "10.201.0.0/16", dataDir: dataDir("b") });
    expect(c.subnet).toBeNull();
    expect(c.reason).toContain("stdead-0");
    expect(c.reason).toContain("ip link del stdead-0");
    expect(c.reason).toContain("SANDTREE_NETWORK_SUBNET");
  });

  it("does not count its own taps from before a restart", () => {
    const c = choose({ configured: "10.201.0.0/16", dataDir: dataDir("c"), ownPrefix: "stdead-" });
    expect(c.subnet).toBe("10.201.0.0/16");
  });

  it("skips the pool a live server claimed and takes over a dead server's claim", () => {
    const nsInode = /\[(\d+)\]/.exec(
      execFileSync("ip", ["netns", "exec", ns, "readlink", "/proc/self/ns/net"], { encoding: "utf8" }),
    )?.[1];
    const dir = path.join(claims, `netns-${nsInode}`);
    mkdirSync(dir, { recursive: true });
    // A live process of another data dir holds 10.203; a dead one held 10.204.
    writeFileSync(path.join(dir, "10.203.0.0_16.json"), JSON.stringify({ pid: process.pid, dataDir: "/elsewhere" }));
    writeFileSync(path.join(dir, "10.204.0.0_16.json"), JSON.stringify({ pid: 2 ** 22 + 1, dataDir: "/gone" }));
    const live = choose({ configured: "10.203.0.0/16", dataDir: dataDir("d") });
    expect(live.subnet).toBeNull();
    expect(live.reason).toContain(`pid ${process.pid}`);
    const dead = choose({ configured: "10.204.0.0/16", dataDir: dataDir("e") });
    expect(dead.subnet).toBe("10.204.0.0/16");
  });

  it("leaves no empty claims directory behind once its claim is released", () => {
    const own = path.join(scratch, "own-claims");
    const c = choose({ dataDir: dataDir("f"), claimsDir: own, release: true });
    expect(c.subnet).toBe("10.202.0.0/16");
    expect(existsSync(own) ? readdirSync(own) : []).toEqual([]);
  });
});

describe("a server without sandbox networks", () => {
  const t = serverForFile();

  it("refuses egress lists and tunnels with 409 NETWORK_UNAVAILABLE, creating nothing", async () => {
    for (const [field, value] of [
      ["network_allowlist", ["pypi.org"]],
      ["network_denylist", ["203.0.113.0/24"]],
      ["tunnels", { llm: "127.0.0.1:8000" }],
    ] as const) {
      const r = await t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", [field]: value });
      expect(r.status, JSON.stringify(r.body)).toBe(409);
      expect(r.body.code).toBe("NETWORK_UNAVAILABLE");
      expect(r.body.details.field).toBe(field);
      expect(r.body.message).toContain("turned off");
    }
    const list = await t.api("GET", "/v1/sandboxes");
    expect(list.body.sandboxes).toHaveLength(0);
  });
});
