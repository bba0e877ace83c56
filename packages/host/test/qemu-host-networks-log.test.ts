// A QEMU host made from outside (tests, bench/isolation.mjs) with its default sandbox networks:
// their warnings reach the logger it was given, or stderr without one, never nowhere. The warning
// here: a sandbox still active at open whose tunnel cannot listen again (its tap is gone). Runs
// in a network namespace of its own (root, iproute2, nftables), in a child process: a namespace
// is per process.
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const HOST_DIST = fileURLToPath(new URL("../dist/index.js", import.meta.url));
const ns = `stwarn${process.pid}`;
const scratch = mkdtempSync(path.join(tmpdir(), "sandtree-host-warn-"));

/** Opens and closes a fresh QEMU host's networks in the namespace, with a sandbox whose tunnel cannot come back. */
function openWithLostTunnel(withLog: boolean): { stdout: string; stderr: string } {
  const script = `
    const { createQemuHost } = await import(${JSON.stringify(HOST_DIST)});
    const log = { warn: (o, m) => process.stdout.write(JSON.stringify({ logged: m, ...o }) + "\\n") };
    const host = createQemuHost(${withLog} ? { log } : {});
    const live = [{ sandboxId: "sb-lost", slot: 1, enabled: true, generation: 1,
      policy: { mode: "allow_all", allow: [], deny: [] }, tunnels: { db: "127.0.0.1:5432" } }];
    const opened = await host.networks.open({ dataDir: process.argv[1], subnet: "10.203.0.0/24", enabled: "on", dnsUpstreams: ["192.0.2.53"], live });
    await host.networks.close({ destroy: true });
    if (opened.subnet === null) throw new Error(opened.unavailable);`;
  const r = spawnSync(
    "ip",
    ["netns", "exec", ns, process.execPath, "--input-type=module", "-e", script, mkdtempSync(path.join(scratch, "data-"))],
    { encoding: "utf8" },
  );
  if (r.status !== 0) throw new Error(`the host's networks did not open: ${r.stderr}`);
  return { stdout: r.stdout, stderr: r.stderr };
}

beforeAll(() => {
  execFileSync("ip", ["netns", "add", ns]);
  execFileSync("ip", ["netns", "exec", ns, "ip", "link", "set", "lo", "up"]);
});
afterAll(() => {
  spawnSync("ip", ["netns", "del", ns]);
  rmSync(scratch, { recursive: true, force: true });
});

describe("createQemuHost's default networks", () => {
  it("warn to the logger the host was given", () => {
    const { stdout, stderr } = openWithLostTunnel(true);
    const lines = stdout
      .trim()
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { logged: string; sandbox?: string });
    expect(lines).toContainEqual(expect.objectContaining({ logged: "tunnels not restored", sandbox: "sb-lost" }));
    expect(stderr).not.toContain("tunnels not restored");
  });

  it("warn on stderr when it was given none", () => {
    const { stdout, stderr } = openWithLostTunnel(false);
    expect(stdout).toBe("");
    expect(stderr).toMatch(/"level":"warn".*"sandbox":"sb-lost".*"msg":"tunnels not restored"/);
  });
});
