import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { desktopCalls } from "./desktop-helpers.js";
import { startTestServer, type TestServer } from "./helpers.js";
import { RfbClient } from "./rfb-client.js";

// One desktop (with accessibility) on a server without sandbox networks: its live VNC stream over
// the API's WebSocket, a GTK application's at-spi tree, and a filesystem fork that brings its own
// display up. A small display keeps TCG's framebuffer work cheap. No timing is asserted.
const DISPLAY = { width: 640, height: 480, accessibility: true };
let t: TestServer;
const { sandboxes, create, act, deleteAll } = desktopCalls(() => t);
let d = "";

const vncUrl = (id: string, query = "") => `${t.url.replace("http", "ws")}/v1/sandboxes/${id}/desktop/vnc${query}`;

type Node = {
  role: string;
  name: string;
  bounds: { x: number; y: number; width: number; height: number } | null;
  children?: Node[];
};
const flatten = (n: Node | null): Node[] => (n ? [n, ...(n.children ?? []).flatMap(flatten)] : []);

beforeAll(async () => {
  t = await startTestServer();
  d = await create({ image: "sandtree/desktop", memory_gb: 0.75, display: DISPLAY, network: false });
  await t.waitRunning(d);
});

afterAll(async () => {
  await deleteAll();
  await t?.close();
});

describe("desktop: live view, accessibility, filesystem forks", () => {
  it("streams the display as RFB over the API's WebSocket, view only unless interactive=true", { timeout: 400_000 }, async () => {
    await act(d, { type: "move", x: 10, y: 10 });
    // Browsers offer the key as a subprotocol; noVNC offers "binary", which is what comes back.
    const view = await RfbClient.open(vncUrl(d), ["binary", `bearer.${t.key}`]);
    expect(view.ws.protocol).toBe("binary");
    const init = await view.handshake();
    expect(init.version).toMatch(/^RFB 003\.00[78]$/);
    expect({ width: init.width, height: init.height }).toEqual({ width: 640, height: 480 });
    view.pointer(200, 150);
    await view.sync(); // x11vnc has handled the PointerEvent: view only, it was dropped
    expect((await act(d, { type: "cursor" })).result).toEqual({ x: 10, y: 10 });
    view.close();

    const live = await RfbClient.open(vncUrl(d, "?interactive=true"), [], { authorization: `Bearer ${t.key}` });
    expect(await live.handshake()).toMatchObject({ width: 640, height: 480 });
    live.pointer(200, 150);
    await live.sync();
    expect((await act(d, { type: "cursor" })).result).toEqual({ x: 200, y: 150 });
    live.close();
  });

  it("refuses the VNC socket to another team (404), a bad query (400) and a sandbox without a display (409)", {
    timeout: 300_000,
  }, async () => {
    await t.api("POST", "/v1/teams", { name: "others" });
    const other = (await t.api("POST", "/v1/keys", { team: "others" })).body.key as string;
    await expect(RfbClient.open(vncUrl(d), [], { authorization: `Bearer ${other}` })).rejects.toThrow(/HTTP 404/);
    await expect(RfbClient.open(vncUrl(d, "?interactive=yes"), [], { authorization: `Bearer ${t.key}` })).rejects.toThrow(
      /HTTP 400 .*interactive/,
    );
    const plain = await create({ image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 });
    await t.waitRunning(plain);
    await expect(RfbClient.open(vncUrl(plain), [], { authorization: `Bearer ${t.key}` })).rejects.toThrow(
      /HTTP 409 .*NO_DISPLAY/,
    );
    await t.api("DELETE", `/v1/sandboxes/${plain}`);
  });

  it("reads a GTK application's accessibility tree and the element under the pointer", { timeout: 400_000 }, async () => {
    const launched = await t.api("POST", `/v1/sandboxes/${d}/exec`, {
      command: ["sandtree-desktop", "launch", "sandtree-gtk-demo", "gtk-demo"],
    });
    expect(launched.body.exit_code, JSON.stringify(launched.body)).toBe(0);
    await act(d, { type: "wait_window", title: "gtk-demo", timeout_ms: 120_000 });
    await act(d, { type: "wait_settle", quiet_ms: 1000, timeout_ms: 60_000 });
    const tree = (await act(d, { type: "accessibility_tree" })).result?.tree as Node | null;
    const nodes = flatten(tree);
    expect(nodes[0]).toMatchObject({ role: "frame", name: "gtk-demo" });
    const label = nodes.find((n) => n.role === "label" && n.name === "Hello from GTK");
    const button = nodes.find((n) => n.role === "push button" && n.name === "Press me");
    expect(label?.bounds?.width).toBeGreaterThan(0);
    expect(button?.bounds?.width).toBeGreaterThan(0);
    const b = button?.bounds ?? { x: 0, y: 0, width: 0, height: 0 };
    // Moving onto the button: the event names the element under the pointer.
    const center = { x: b.x + Math.floor(b.width / 2), y: b.y + Math.floor(b.height / 2) };
    const moved = await act(d, { type: "move", ...center });
    expect(moved.element).toMatchObject({ role: "push button", name: "Press me" });
    // A click presses it: the label's accessible name follows.
    await act(d, { type: "click", ...center });
    const after = flatten((await act(d, { type: "accessibility_tree" })).result?.tree as Node | null);
    expect(after.find((n) => n.role === "label")?.name).toBe("pressed 1");
  });

  it("brings the display up in a filesystem fork: its log is the parent's, its screen a fresh one", {
    timeout: 400_000,
  }, async () => {
    const parentLog = (await t.api("GET", `/v1/sandboxes/${d}/desktop/events`)).body as string;
    const parentSeqs = parentLog.split("\n").filter(Boolean).length;
    const f = await t.api("POST", `/v1/sandboxes/${d}/fork`, { memory: false });
    expect(f.status, JSON.stringify(f.body)).toBe(201);
    const child = f.body.id as string;
    sandboxes.push(child);
    await t.waitRunning(child);
    // Before any action: the server brought the display up as the fork started (not the first action).
    const info = await t.api("GET", `/v1/sandboxes/${child}/desktop`);
    expect(info.body).toMatchObject({ width: 640, height: 480, accessibility: true, running: true });
    const shot = await act(child, { type: "screenshot" });
    expect(shot.seq).toBe(parentSeqs + 1);
    expect(shot.display).toEqual({ width: 640, height: 480 });
    // The disk carried the log; the GTK window lived in the parent's memory only.
    expect((await act(child, { type: "windows" })).result).toEqual({ windows: [] });
  });
});
