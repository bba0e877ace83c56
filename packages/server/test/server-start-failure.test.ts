// A start that fails late must undo what it started (#mend-4): with sandbox networking on, the
// network service makes its nftables table `sandtree_<tag>` before the server listens; a port in
// use then fails the start. Nothing may stay: no table, no tap, no process holding the namespace,
// and the process exits by itself. The server runs in a child inside a namespace this test makes.
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { UnwindStack } from "../src/unwind-stack.js";
import { ServerNetns } from "./shutdown/server-netns.js";

const SCRIPT = fileURLToPath(new URL("./shutdown/serve-start-fails.mjs", import.meta.url));
const ns = new ServerNetns("ststart");
/** Bound on each wait: a process holding nothing exits at once; a regression must fail, not hang. */
const EXIT_BOUND_MS = 60_000;

/** Waits (polling) until `done()` holds; fails naming `what` after EXIT_BOUND_MS: a regression must fail, not hang. */
async function bounded(done: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + EXIT_BOUND_MS;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`waited ${EXIT_BOUND_MS / 1000} s for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

afterAll(() => {
  // Whatever a failure left: the child, the namespace, the files.
  ns.destroy();
});

describe("a start that fails", () => {
  it("late (its port in use, networking on) leaves no nftables table, tap or process, and the process exits", {
    timeout: 180_000,
  }, async () => {
    const { proc, out: output } = ns.startServerScript(SCRIPT, "sandtree-startfail-");
    let exit: number | string | null = null;
    proc.once("exit", (code, signal) => (exit = code ?? String(signal)));
    await bounded(() => output.stdout.includes("\n") || exit !== null, "the failed start to be reported");
    const out = JSON.parse(output.stdout.trim().split("\n").at(-1) ?? "{}");
    expect(out.started, output.stderr).toBeUndefined();
    expect(out, output.stderr).toMatchObject({ code: "EADDRINUSE" });
    // Reported once startServer rejected: what it set up is gone by then.
    const left = ns.leftovers();
    expect(left.tables).not.toContain("sandtree_");
    expect(left.taps).toEqual([]);
    await bounded(() => exit !== null, "the process to exit by itself").catch(() => {});
    expect(exit ?? `still running ${EXIT_BOUND_MS / 1000} s after the failed start`, `${output.stdout}\n${output.stderr}`).toBe(
      0,
    );
    expect(ns.pids()).toEqual([]);
  });

  it("UnwindStack undoes last first, runs every step when one fails, once, and reports the first failure", async () => {
    const done: string[] = [];
    const stack = new UnwindStack();
    stack.push("a", () => done.push("a"));
    stack.push("b", () => {
      throw new Error("b broke");
    });
    stack.push("c", async () => {
      done.push("c");
    });
    const first = stack.run();
    const again = stack.run();
    await expect(first).rejects.toThrow("undoing b failed: b broke");
    await expect(again).rejects.toThrow("undoing b failed: b broke");
    expect(done).toEqual(["c", "a"]);
    await expect(stack.run()).rejects.toThrow("undoing b failed");
    expect(done).toEqual(["c", "a"]);
  });
});
