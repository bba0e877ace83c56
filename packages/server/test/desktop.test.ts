import { createHash } from "node:crypto";
import { readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { DesktopEvent } from "@sandtree/protocol";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { desktopCalls } from "./desktop-helpers.js";
import { runCli, startTestServer, type TestServer } from "./helpers.js";

// One recorded desktop (A), one fresh desktop to replay into (B, booted alongside A), two memory
// forks of A. A small display keeps TCG's screenshots cheap. No timing is asserted.
const DISPLAY = { width: 800, height: 600 };
let t: TestServer;
const { sandboxes, create, act, deleteAll } = desktopCalls(() => t);
let a = "";
let b = "";

const sandtree = (args: string[]) => runCli(t, args);

async function events(id: string): Promise<DesktopEvent[]> {
  const res = await fetch(`${t.url}/v1/sandboxes/${id}/desktop/events`, { headers: { authorization: `Bearer ${t.key}` } });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toContain("application/x-ndjson");
  const text = await res.text();
  return text
    .split("\n")
    .filter(Boolean)
    .map((l) => DesktopEvent.parse(JSON.parse(l)));
}

beforeAll(async () => {
  t = await startTestServer();
  const desktop = { image: "sandtree/desktop", memory_gb: 0.75, display: DISPLAY };
  a = await create(desktop);
  b = await create(desktop);
  await Promise.all([t.waitRunning(a), t.waitRunning(b)]);
});

afterAll(async () => {
  await deleteAll();
  await t?.close();
});

describe("desktop sessions", () => {
  // The first call into A waits for its display to come up (Xvfb, openbox): minutes on a loaded machine.
  it("refuses bad displays, malformed actions and coordinates off the display, naming the field", {
    timeout: 400_000,
  }, async () => {
    const big = await t.api("POST", "/v1/sandboxes", { image: "sandtree/desktop", display: { width: 99_999, height: 600 } });
    expect(big.status).toBe(400);
    expect(big.body.details.field).toBe("display.width");
    const unknown = await t.api("POST", `/v1/sandboxes/${a}/desktop/actions`, { type: "teleport" });
    expect(unknown.status).toBe(400);
    expect(unknown.body.details.field).toBe("type");
    const half = await t.api("POST", `/v1/sandboxes/${a}/desktop/actions`, { type: "click", x: 10 });
    expect(half.status).toBe(400);
    expect(half.body.details.field).toBe("x");
    const keys = await t.api("POST", `/v1/sandboxes/${a}/desktop/actions`, { type: "key", keys: "ctrl+;rm" });
    expect(keys.status).toBe(400);
    expect(keys.body.details.field).toBe("keys");
    const off = await t.api("POST", `/v1/sandboxes/${a}/desktop/actions`, {
      type: "drag",
      from: { x: 1, y: 1 },
      to: { x: 5, y: 600 },
    });
    expect(off.status).toBe(400);
    expect(off.body.code).toBe("OUT_OF_DISPLAY");
    expect(off.body.details.field).toBe("to.y");
  });

  it("answers 409 NO_DISPLAY for a sandbox created without a display", { timeout: 300_000 }, async () => {
    const plain = await create({ image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 });
    // An image that declares nothing keeps the idle default: no display, no start command.
    expect(await t.waitRunning(plain)).toMatchObject({ display: null, start_command: null });
    const r = await t.api("POST", `/v1/sandboxes/${plain}/desktop/actions`, { type: "screenshot" });
    expect(r.status).toBe(409);
    expect(r.body.code).toBe("NO_DISPLAY");
    await t.api("DELETE", `/v1/sandboxes/${plain}`);
  });

  it("gives a desktop image created without a display the display its image declares", { timeout: 400_000 }, async () => {
    const plain = await create({ image: "sandtree/desktop", memory_gb: 0.75 });
    // The label sandtree.display of sandtree/desktop: the sandbox's record shows what was used.
    expect((await t.waitRunning(plain)).display).toBe("1280x800");
    const info = await t.api("GET", `/v1/sandboxes/${plain}/desktop`);
    expect(info.status, JSON.stringify(info.body)).toBe(200);
    expect(info.body).toMatchObject({ width: 1280, height: 800, running: true });
    await t.api("DELETE", `/v1/sandboxes/${plain}`);
  });

  it("opens xterm by keyboard, types a command into it and sees it in the window list", { timeout: 400_000 }, async () => {
    const info = await t.api("GET", `/v1/sandboxes/${a}/desktop`);
    expect(info.body).toMatchObject({ ...DISPLAY, running: true });
    await act(a, { type: "screenshot" });
    await act(a, { type: "key", keys: "ctrl+alt+t" });
    const opened = await act(a, { type: "wait_window", title: "terminal" });
    expect(opened.result).toMatchObject({ window: { class: "xterm.XTerm", title: "terminal" } });
    // The command retitles its own terminal: proof that the keystrokes reached the shell in it.
    const typed = await act(a, { type: "type", text: "printf '\\033]0;%s\\007' sandtree-typed\n" });
    expect(typed.screen_after.sha256).not.toBe(typed.screen_before.sha256);
    await act(a, { type: "wait_window", title: "sandtree-typed" });
    const listed = await act(a, { type: "windows" });
    const windows = listed.result?.windows as Array<{ title: string; focused: boolean }>;
    expect(windows.find((w) => w.focused)?.title).toBe("sandtree-typed");
    expect(listed.focused_window).toEqual({ title: "sandtree-typed", class: "xterm.XTerm" });
    const click = await act(a, { type: "click", x: 400, y: 300 });
    expect(click.pointer).toEqual({ x: 400, y: 300 });
    // A screenshot asked as image/png answers the PNG whose hash the log records.
    const res = await fetch(`${t.url}/v1/sandboxes/${a}/desktop/actions`, {
      method: "POST",
      headers: { authorization: `Bearer ${t.key}`, "content-type": "application/json", accept: "image/png" },
      body: JSON.stringify({ type: "screenshot" }),
    });
    expect(res.status).toBe(200);
    const png = Buffer.from(await res.arrayBuffer());
    expect(png.subarray(1, 4).toString()).toBe("PNG");
    expect(createHash("sha256").update(png).digest("hex")).toBe(res.headers.get("x-sandtree-screenshot-sha256"));
  });

  it("serves the display over VNC in the guest; exposing it needs the sandbox's network", { timeout: 300_000 }, async () => {
    // This test server runs without sandbox networks: the API refuses to expose the port...
    const r = await t.api("POST", `/v1/sandboxes/${a}/desktop/vnc`, {});
    expect(r.status).toBe(409);
    expect(r.body.code).toBe("NETWORK_DISABLED");
    // ...while x11vnc itself starts and listens on 5900 (0x170C) in the guest, view-only.
    const started = await t.api("POST", `/v1/sandboxes/${a}/exec`, { command: ["sandtree-desktop", "vnc", "5900"] });
    expect(started.body.exit_code, JSON.stringify(started.body)).toBe(0);
    expect(JSON.parse(started.body.stdout)).toEqual({ port: 5900, view_only: true });
    let listening = false;
    for (let i = 0; i < 60 && !listening; i++) {
      const tcp = await t.api("POST", `/v1/sandboxes/${a}/exec`, { command: "cat /proc/net/tcp /proc/net/tcp6 2>/dev/null" });
      listening = / [0-9A-F]+:170C [0-9A-F]+:0000 0A /.test(tcp.body.stdout);
      if (!listening) await new Promise((res) => setTimeout(res, 500));
    }
    expect(listening).toBe(true);
    expect((await t.api("GET", `/v1/sandboxes/${a}/desktop`)).body.vnc).toBe(true);
  });

  it("keeps an event log that validates against the schema, with every screenshot beside it", { timeout: 300_000 }, async () => {
    const log = await events(a);
    expect(log.map((e) => e.seq)).toEqual(log.map((_, i) => i + 1));
    expect(log.map((e) => e.action.type)).toEqual([
      "screenshot",
      "key",
      "wait_window",
      "type",
      "wait_window",
      "windows",
      "click",
      "screenshot",
    ]);
    const shots = new Set(log.flatMap((e) => [e.screen_before.sha256, e.screen_after.sha256]));
    for (const sha of shots) {
      const r = await fetch(`${t.url}/v1/sandboxes/${a}/desktop/screenshots/${sha}`, {
        headers: { authorization: `Bearer ${t.key}` },
      });
      expect(r.status).toBe(200);
      expect(
        createHash("sha256")
          .update(Buffer.from(await r.arrayBuffer()))
          .digest("hex"),
      ).toBe(sha);
    }
    expect((await t.api("GET", `/v1/sandboxes/${a}/desktop/events?after_seq=6`)).body.split("\n").filter(Boolean)).toHaveLength(
      2,
    );
  });

  it("replays the log into a fresh desktop, every step matching", { timeout: 400_000 }, async () => {
    const r = await t.api("POST", `/v1/sandboxes/${b}/desktop/replay`, { source_sandbox_id: a });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.total).toBe(8);
    expect(r.body.steps.filter((s: { match: boolean }) => !s.match)).toEqual([]);
    expect(r.body.all_match).toBe(true);
    // The replay is itself recorded in B's log, step for step.
    expect((await events(b)).map((e) => e.action)).toEqual((await events(a)).map((e) => e.action));
  });

  it("forks the desktop mid-task into two children that diverge from the parent's log", { timeout: 400_000 }, async () => {
    const parentLog = await events(a);
    const f = await t.api("POST", `/v1/sandboxes/${a}/fork`, { memory: true, count: 2 });
    expect(f.status, JSON.stringify(f.body)).toBe(201);
    const kids = f.body.sandboxes.map((s: { id: string }) => s.id) as string[];
    sandboxes.push(...kids);
    await Promise.all(kids.map((id) => t.waitRunning(id)));
    const ends: string[] = [];
    for (const [i, id] of kids.entries()) {
      // The terminal is still open and focused in each child: no new window, straight to typing.
      const typed = await act(id, { type: "type", text: `printf '\\033]0;%s\\007' child-${i}\n` });
      expect(typed.seq).toBe(parentLog.length + 1);
      expect(typed.screen_before.sha256).toBe(parentLog.at(-1)?.screen_after.sha256);
      // A generous wait: two forked desktops share 2 TCG cores with the rest of the suite.
      await act(id, { type: "wait_window", title: `child-${i}`, timeout_ms: 60_000 });
      ends.push((await act(id, { type: "screenshot" })).screen_after.sha256);
      const log = await events(id);
      expect(log.slice(0, parentLog.length)).toEqual(parentLog);
      expect(log).toHaveLength(parentLog.length + 3);
    }
    expect(ends[0]).not.toBe(ends[1]);
  });

  it("the CLI takes a screenshot, lists the windows and prints the log of the replayed desktop", {
    timeout: 300_000,
  }, async () => {
    const shot = path.join(tmpdir(), `sandtree-desktop-${b}.png`);
    const r = await sandtree(["sandbox", "desktop", "screenshot", b, shot]);
    expect(r.code, r.stderr).toBe(0);
    const sha = r.stdout.trim().split(" ")[1];
    expect(createHash("sha256").update(readFileSync(shot)).digest("hex")).toBe(sha);
    rmSync(shot, { force: true });
    const w = await sandtree(["sandbox", "desktop", "windows", b, "-o", "json"]);
    expect(w.code, w.stderr).toBe(0);
    expect(JSON.parse(w.stdout)).toMatchObject([{ title: "sandtree-typed", class: "xterm.XTerm", focused: true }]);
    const ev = await sandtree(["sandbox", "desktop", "events", b, "--after", "8", "-o", "json"]);
    expect(ev.code, ev.stderr).toBe(0);
    expect(
      ev.stdout
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l).action.type),
    ).toEqual(["screenshot", "windows"]);
    // An action that runs and fails is 422 with its event, recorded as failed.
    const failed = await t.api("POST", `/v1/sandboxes/${b}/desktop/actions`, {
      type: "wait_window",
      title: "no-such",
      timeout_ms: 1,
    });
    expect(failed.status).toBe(422);
    expect(failed.body.code).toBe("DESKTOP_ACTION_FAILED");
    expect(failed.body.details.event).toMatchObject({ seq: 11, ok: false, action: { type: "wait_window" } });
    expect((await events(b)).at(-1)).toEqual(failed.body.details.event);
    // Any action asked with ?format=png answers the screen after it as the PNG's bytes, its event in a header.
    const res = await fetch(`${t.url}/v1/sandboxes/${b}/desktop/actions?format=png`, {
      method: "POST",
      headers: { authorization: `Bearer ${t.key}`, "content-type": "application/json" },
      body: JSON.stringify({ type: "move", x: 20, y: 20 }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("image/png");
    const png = Buffer.from(await res.arrayBuffer());
    const header = Buffer.from(res.headers.get("x-sandtree-desktop-event") ?? "", "base64url").toString("utf8");
    const moved = DesktopEvent.parse(JSON.parse(header));
    expect(moved).toMatchObject({ seq: 12, ok: true, action: { type: "move" }, pointer: { x: 20, y: 20 } });
    expect(createHash("sha256").update(png).digest("hex")).toBe(moved.screen_after.sha256);
    expect((await events(b)).at(-1)).toEqual(moved);
  });
});
