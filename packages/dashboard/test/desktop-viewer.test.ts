// The dashboard's desktop viewer in headless Chromium (Debian's chromium through playwright-core)
// against a real server and a real sandtree/desktop VM: noVNC connects over the API's VNC
// WebSocket and draws the display at its size. One small VM; no timing is asserted.
import { mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli, startTestServer, type TestServer } from "../../server/test/helpers.js";
import { openPage } from "./browser.js";

const shots = process.env.SANDTREE_SCREENSHOT_DIR ?? mkdtempSync(path.join(tmpdir(), "sandtree-dashboard-shots-"));
mkdirSync(shots, { recursive: true });
let t: TestServer;
let browser: Browser;
let page: Page;
let id = "";

beforeAll(async () => {
  t = await startTestServer();
  const r = await t.api("POST", "/v1/sandboxes", {
    image: "sandtree/desktop",
    memory_gb: 0.75,
    display: { width: 640, height: 480 },
  });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  id = r.body.id;
  await t.waitRunning(id);
  ({ browser, page } = await openPage({ width: 1000, height: 800 }));
}, 600_000);

afterAll(async () => {
  await browser?.close();
  if (id) await t?.api("DELETE", `/v1/sandboxes/${id}`);
  await t?.close();
});

describe("the dashboard's desktop viewer", () => {
  it("connects noVNC to the sandbox's display, view only, at the display's size", { timeout: 400_000 }, async () => {
    // A window on the display, so that the picture has something to show.
    for (const action of [
      { type: "key", keys: "ctrl+alt+t" },
      { type: "wait_window", title: "terminal", timeout_ms: 120_000 },
    ]) {
      const r = await t.api("POST", `/v1/sandboxes/${id}/desktop/actions`, action);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
    }
    await page.goto(t.url);
    await page.locator("#api-key").fill(t.key);
    await page.keyboard.press("Enter");
    await page.locator("#nav").waitFor();
    // From the sandbox's page, the link to its live view.
    await page.goto(`${t.url}/#/sandboxes/${id}`);
    await page.locator("#desktop-link").click();
    expect(page.url()).toContain(`#/sandboxes/${id}/desktop`);
    const status = page.locator("#vnc-status");
    // noVNC's "connect" event: the RFB handshake with x11vnc in the guest is done.
    await status.and(page.locator('[data-state="connected"]')).waitFor({ timeout: 300_000 });
    expect(await status.textContent()).toBe("Connected (view only).");
    const canvas = page.locator("#vnc-screen canvas");
    await expect
      .poll(() => canvas.evaluate((c) => [(c as { width: number }).width, (c as { height: number }).height]))
      .toEqual([640, 480]);
    // The frame arrived: the canvas holds the desktop and the terminal, not one flat colour.
    const colours = `(() => {
      const c = document.querySelector("#vnc-screen canvas");
      const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
      const seen = new Set();
      for (let i = 0; i < d.length && seen.size < 3; i += 4 * 97) seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
      return seen.size;
    })()`;
    await expect.poll(() => page.evaluate(colours) as Promise<number>, { timeout: 60_000 }).toBeGreaterThan(1);
    // The key went as a subprotocol, never in a URL.
    expect(page.url()).not.toContain(t.key);
    await page.screenshot({ path: path.join(shots, "dashboard-desktop-viewer.png") });
    // The CLI prints this page's URL and the WebSocket behind it.
    const cli = await runCli(t, ["sandbox", "desktop", "view", id, "-o", "json"]);
    expect(cli.code, cli.stderr).toBe(0);
    expect(JSON.parse(cli.stdout)).toEqual({
      viewer_url: page.url(),
      websocket_url: `${t.url.replace("http", "ws")}/v1/sandboxes/${id}/desktop/vnc`,
      view_only: true,
    });
    const table = await runCli(t, ["sandbox", "desktop", "view", id, "--interactive"]);
    expect(table.stdout).toContain(`/v1/sandboxes/${id}/desktop/vnc?interactive=true`);
  });

  it("says why when the sandbox has no display", { timeout: 300_000 }, async () => {
    const r = await t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 });
    await t.waitRunning(r.body.id);
    await page.goto(`${t.url}/#/sandboxes/${r.body.id}/desktop`);
    await expect.poll(() => page.getByRole("alert").textContent(), { timeout: 60_000 }).toMatch(/has no desktop/);
    await t.api("DELETE", `/v1/sandboxes/${r.body.id}`);
  });
});
