import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { desktopCalls } from "./desktop-helpers.js";
import { startTestServer, type TestServer } from "./helpers.js";

// One desktop with the browser (Chromium in sandtree/desktop) on a server without sandbox
// networks: a page served inside the sandbox on its loopback, opened, a button found by its
// accessible name and clicked with a real pointer click, the changed page read back. The browser
// starts once (by its key chord) and is reused. No timing is asserted.
const DISPLAY = { width: 800, height: 600 };
const PAGE = `<!doctype html><title>sandtree page</title>
<p id="out">Nobody said hello yet.</p>
<button onclick="document.getElementById('out').textContent = 'Hello! trusted=' + event.isTrusted">Say hello</button>`;
let t: TestServer;
const { create, act, deleteAll } = desktopCalls(() => t);
let d = "";

beforeAll(async () => {
  t = await startTestServer();
  d = await create({ image: "sandtree/desktop", memory_gb: 1.5, display: DISPLAY, network: false });
  await t.waitRunning(d);
}, 400_000);

afterAll(async () => {
  await deleteAll();
  await t?.close();
});

describe("desktop: the browser", () => {
  it("opens a page served in the sandbox, clicks a button by its name and reads the changed page", {
    timeout: 600_000,
  }, async () => {
    // ctrl+alt+b starts the browser, a desktop action like any other; open_url then uses it.
    await act(d, { type: "key", keys: "ctrl+alt+b" });
    const serve = await t.api("POST", `/v1/sandboxes/${d}/exec`, {
      command: [
        "sh",
        "-c",
        "mkdir -p /srv/page && cat > /srv/page/index.html && exec sandtree-desktop launch python3 -m http.server 8000 --bind 127.0.0.1 --directory /srv/page",
      ],
      stdin: PAGE,
    });
    expect(serve.body.exit_code, JSON.stringify(serve.body)).toBe(0);

    await act(d, { type: "wait_window", title: "Chromium", timeout_ms: 300_000 });
    const opened = await act(d, { type: "open_url", url: "http://127.0.0.1:8000/", timeout_ms: 300_000 });
    expect(opened.result).toMatchObject({ url: "http://127.0.0.1:8000/", title: "sandtree page", browser_started: false });
    expect((await act(d, { type: "page_text" })).result?.text).toContain("Nobody said hello yet.");

    const clicked = await act(d, { type: "click_element", name: "Say hello", role: "button", timeout_ms: 60_000 });
    expect(clicked.result).toMatchObject({ role: "button", name: "Say hello" });
    // A pointer click at the button's place on the screen: the pointer is where the result says.
    expect(clicked.pointer).toEqual({ x: clicked.result?.x, y: clicked.result?.y });
    const page = await act(d, { type: "page_text" });
    expect(page.result).toMatchObject({ url: "http://127.0.0.1:8000/", title: "sandtree page", truncated: false });
    expect(page.result?.text).toContain("Hello! trusted=true");

    const log = (await t.api("GET", `/v1/sandboxes/${d}/desktop/events`)).body as string;
    const types = log
      .split("\n")
      .filter(Boolean)
      .map((l) => (JSON.parse(l) as { action: { type: string } }).action.type);
    expect(types.slice(-4)).toEqual(["open_url", "page_text", "click_element", "page_text"]);
  });

  it("refuses a bad URL (400) and records an element the page lacks as a failed action (422)", {
    timeout: 300_000,
  }, async () => {
    for (const url of ["javascript:alert(1)", "not a url"]) {
      const r = await t.api("POST", `/v1/sandboxes/${d}/desktop/actions`, { type: "open_url", url });
      expect(r.status).toBe(400);
      expect(r.body).toMatchObject({ code: "VALIDATION_FAILED", details: { field: "url" } });
    }
    const bad = await t.api("POST", `/v1/sandboxes/${d}/desktop/actions`, { type: "click_element", name: "x", role: "a b" });
    expect(bad.body).toMatchObject({ code: "VALIDATION_FAILED", details: { field: "role" } });
    const missing = await t.api("POST", `/v1/sandboxes/${d}/desktop/actions`, {
      type: "click_element",
      name: "No such button",
      timeout_ms: 1000,
    });
    expect(missing.status).toBe(422);
    expect(missing.body.code).toBe("DESKTOP_ACTION_FAILED");
    expect(missing.body.details.event).toMatchObject({ ok: false, action: { type: "click_element" } });
    expect(missing.body.message).toMatch(/no element named 'No such button' on the page/);
  });
});
