// The dashboard in headless Chromium (Debian's chromium driven by playwright-core) against a
// real server with real busybox sandboxes: sign-in, the cards against /v1/stats, the table's
// label filter and pages, a sandbox's page with a command run through it, the checkpoint tree,
// the usage page against /v1/usage, and a bad key. Screenshots go to $SANDTREE_SCREENSHOT_DIR
// (default: a temp dir); SANDTREE_UPDATE_README_SCREENSHOT=1 also writes docs/images/dashboard.png.
import { mkdirSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SqliteStore } from "../../server/src/index.js";
import { startTestServer, type TestServer } from "../../server/test/helpers.js";
import { usageAmount, usageCost, usd } from "../src/format.js";
import { openPage } from "./browser.js";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const shots = process.env.SANDTREE_SCREENSHOT_DIR ?? mkdtempSync(path.join(tmpdir(), "sandtree-dashboard-shots-"));
mkdirSync(shots, { recursive: true });
const SEEDED = 60;

let t: TestServer;
let browser: Browser;
let page: Page;
let web: string;
let worker: string;
let c1: string;
let c2: string;

async function waitDurable(cid: string): Promise<void> {
  for (let i = 0; i < 1200; i++) {
    const r = await t.api("GET", `/v1/checkpoints/${cid}`);
    if (r.body.state === "DURABLE") return;
    if (r.body.state === "FAILED") throw new Error(`checkpoint failed: ${r.body.error}`);
    await new Promise((res) => setTimeout(res, 100));
  }
  throw new Error(`checkpoint ${cid} never became DURABLE`);
}

async function checkpoint(id: string): Promise<string> {
  const r = await t.api("POST", `/v1/sandboxes/${id}/checkpoints`, {});
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  await waitDurable(r.body.id);
  return r.body.id;
}

/** An expression evaluated in the page (a string: this file is type-checked without the DOM's types). */
function inPage<T>(expression: string): Promise<T> {
  return page.evaluate(expression) as Promise<T>;
}

/**
 * The lowest WCAG contrast ratio among the text of the elements `selector` matches (their colour
 * against the first opaque background at or above them).
 */
const lowestContrast = (selector: string) =>
  inPage<number>(`(() => {
    const rgb = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
    const lum = ([r, g, b]) => {
      const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
      return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
    };
    const bg = (el) => {
      for (; el; el = el.parentElement) {
        const c = rgb(getComputedStyle(el).backgroundColor);
        if (c.length === 3 || c[3] === 1) return c;
      }
      return [255, 255, 255];
    };
    const ratios = [...document.querySelectorAll(${JSON.stringify(selector)})].map((el) => {
      const a = lum(rgb(getComputedStyle(el).color));
      const b = lum(bg(el));
      return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    });
    return ratios.length ? Math.min(...ratios) : 0;
  })()`);

async function shot(name: string): Promise<string> {
  const file = path.join(shots, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  expect(readFileSync(file).subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
  return file;
}

async function signIn(key: string): Promise<void> {
  await page.goto(t.url);
  // Keyboard only: the key field has focus on load, Enter submits.
  await expect.poll(() => inPage<string | undefined>("document.activeElement?.id")).toBe("api-key");
  await page.keyboard.type(key);
  await page.keyboard.press("Enter");
}

beforeAll(async () => {
  t = await startTestServer();
  const small = { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 };
  const a = await t.api("POST", "/v1/sandboxes", { ...small, name: "web-1", labels: { app: "web", tier: "front" } });
  const b = await t.api("POST", "/v1/sandboxes", { ...small, name: "worker-1", labels: { app: "worker" } });
  expect([a.status, b.status]).toEqual([201, 201]);
  web = a.body.id;
  worker = b.body.id;
  await Promise.all([t.waitRunning(web), t.waitRunning(worker)]);
  c1 = await checkpoint(web);
  await t.api("POST", `/v1/sandboxes/${web}/exec`, { command: "echo two > /root/two" });
  c2 = await checkpoint(web);
  // Ended sandboxes from two days ago, written straight into the store (no VMs), so the table
  // has pages to turn; outside the 24-hour window, so the cards count only the live two.
  const store = new SqliteStore(path.join(t.dataDir, "sandtree.db"));
  try {
    const base = (await t.api("GET", `/v1/sandboxes/${worker}`)).body;
    const at = new Date(Date.now() - 48 * 3600_000);
    for (let i = 0; i < SEEDED; i++) {
      const when = new Date(at.getTime() + i * 1000).toISOString();
      await store.insertSandbox({
        ...base,
        id: `sbx_seeded${String(i).padStart(4, "0")}`,
        name: `seeded-${i}`,
        status: "TERMINATED",
        labels: { app: "batch" },
        created_at: when,
        updated_at: when,
        started_at: when,
        terminated_at: when,
      });
    }
  } finally {
    await store.close();
  }
  ({ browser, page } = await openPage({ width: 1280, height: 900 }));
}, 900_000);

afterAll(async () => {
  await browser?.close();
  await t?.close();
});

describe("the web dashboard at /", () => {
  it("shows an error for a bad key, not a blank page, and stores nothing", async () => {
    await signIn("st_not-a-real-key");
    const alert = page.getByRole("alert");
    await expect.poll(() => alert.textContent()).toMatch(/refused/);
    expect(await inPage<number>("sessionStorage.length")).toBe(0);
    await shot("dashboard-bad-key");
  });

  it("signs in and shows the same counts as GET /v1/stats", async () => {
    const answered = page.waitForResponse((r) => r.url().includes("/v1/stats?"));
    await signIn(t.key);
    const shown = await (await answered).json();
    await page.locator("#card-created").waitFor();
    // The cards say what the API answered the page, and the counts match a fresh call.
    expect(await page.locator("#card-created").textContent()).toBe(String(shown.created));
    expect(await page.locator("#card-running").textContent()).toBe(String(shown.running));
    expect(await page.locator("#card-error-rate").textContent()).toBe(`${(shown.error_rate * 100).toFixed(1)}%`);
    expect(await page.locator("#card-cost").textContent()).toBe(usd(shown.estimated_cost_usd));
    const stats = (await t.api("GET", "/v1/stats?window_hours=24&bucket_minutes=30")).body;
    expect([stats.created, stats.running, stats.failed]).toEqual([2, 2, 0]);
    expect([shown.created, shown.running, shown.failed]).toEqual([stats.created, stats.running, stats.failed]);
    expect(await page.locator("figure.chart canvas").count()).toBe(2);
    // The key is in session storage only, never in the URL.
    expect(page.url()).not.toContain(t.key);
    expect(await inPage<string | null>('sessionStorage.getItem("sandtree.api_key")')).toBe(t.key);
    // Every form control has a label.
    const unlabelled = await inPage<number>(
      `[...document.querySelectorAll("input, select")].filter((el) => !document.querySelector('label[for="' + el.id + '"]')).length`,
    );
    expect(unlabelled).toBe(0);
    // Text meets WCAG AA contrast (4.5:1) against what is behind it.
    expect(
      await lowestContrast("header a, header button, h1, .hint, .card-label, .card-value, figcaption"),
    ).toBeGreaterThanOrEqual(4.5);
    const file = await shot("dashboard-overview");
    if (process.env.SANDTREE_UPDATE_README_SCREENSHOT === "1") {
      await page.screenshot({ path: path.join(repo, "docs", "images", "dashboard.png") });
    }
    expect(file).toMatch(/\.png$/);
  });

  it("lists sandboxes a page at a time, filters by label and status", async () => {
    await page.getByRole("link", { name: "Sandboxes" }).click();
    const rows = page.locator("#sandbox-table tbody tr");
    await expect.poll(() => rows.count()).toBe(50);
    expect(await page.locator("#page-next").isEnabled()).toBe(true);
    await page.locator("#page-next").click();
    await expect.poll(() => page.locator("#page-info").textContent()).toMatch(/^Page 2: 12 sandboxes$/);
    expect(await page.locator("#page-next").isEnabled()).toBe(false);

    await page.getByLabel("Labels (key=value, comma-separated)").fill("app=web");
    await page.getByRole("button", { name: "Filter" }).click();
    await expect.poll(() => rows.count()).toBe(1);
    expect(await rows.first().getAttribute("data-id")).toBe(web);
    expect(await rows.first().textContent()).toContain("RUNNING");

    await page.getByLabel("Labels (key=value, comma-separated)").fill("");
    await page.getByLabel("Status").selectOption("RUNNING");
    await page.getByRole("button", { name: "Filter" }).click();
    await expect.poll(() => page.locator("#page-info").textContent()).toBe("Page 1: 2 sandboxes");
    const ids = await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute("data-id")));
    const api = (await t.api("GET", "/v1/sandboxes?status=RUNNING")).body.sandboxes.map((s: { id: string }) => s.id);
    expect(ids).toEqual(api);
    expect(await lowestContrast("th, td, .status, button, label")).toBeGreaterThanOrEqual(4.5);
    await shot("dashboard-sandboxes");
  });

  it("opens a sandbox, shows its log and events, runs a command and shows its output", async () => {
    await page.getByRole("link", { name: "web-1" }).click();
    await page.locator("#console-log").waitFor();
    const logs = (await t.api("GET", `/v1/sandboxes/${web}/logs`)).body;
    expect(await page.locator("#events li").count()).toBe(logs.events.length);
    expect((await page.locator("#console-log").textContent())?.length).toBeGreaterThan(0);
    // Signed in with an admin key: the sandbox's host is shown (the server's own, `local`).
    const host = page.locator("dl.details dt", { hasText: /^Host$/ }).locator("xpath=following-sibling::dd[1]");
    expect(await host.textContent()).toBe("local");
    await page.getByLabel("Command (runs under /bin/sh -c)").fill("echo dashboard-$((6 * 7)); cat /root/two");
    await page.getByRole("button", { name: "Run" }).click();
    await page.locator("#exec-stdout").waitFor();
    expect(await page.locator("#exec-stdout").textContent()).toBe("dashboard-42\ntwo\n");
    expect(await page.locator("#exec-exit").textContent()).toMatch(/^exit code 0,/);
    await shot("dashboard-sandbox");
  });

  it("draws the checkpoints as a tree with state, stored bytes and cost", async () => {
    await page.getByRole("link", { name: "Checkpoints" }).click();
    // The checkpoints view itself (the sandbox view draws a checkpoint tree too, and the click
    // replaces it only once the view's data came back): wait for what only this view shows.
    await page.locator("#checkpoint-summary").waitFor();
    await page.locator(`[data-checkpoint="${c1}"]`).waitFor();
    // The second checkpoint is drawn inside the first, its parent.
    await page.locator(`[data-checkpoint="${c1}"] [data-checkpoint="${c2}"]`).waitFor();
    expect(await page.locator(`[data-checkpoint="${c1}"] [data-checkpoint="${c2}"]`).count()).toBe(1);
    const cps = (await t.api("GET", "/v1/checkpoints")).body.checkpoints as { id: string; parent_id: string | null }[];
    expect(cps.find((c) => c.id === c2)?.parent_id).toBe(c1);
    const node = await page.locator(`[data-checkpoint="${c1}"] > .node`).textContent();
    expect(node).toContain("DURABLE");
    expect(node).toMatch(/stored/);
    expect(node).toMatch(/\$\d/);
    // Keyboard: the first node takes focus, ArrowDown moves to its child.
    await page.locator(`[data-checkpoint="${c1}"]`).focus();
    await page.keyboard.press("ArrowDown");
    expect(await inPage<string | null>('document.activeElement?.getAttribute("data-checkpoint")')).toBe(c2);
    expect(await lowestContrast(".tree code, .tree .state, .tree span, .tree a")).toBeGreaterThanOrEqual(4.5);
    await shot("dashboard-checkpoints");
  });

  it("shows the same usage totals as GET /v1/usage", async () => {
    await page.getByRole("link", { name: "Usage" }).click();
    await page.getByLabel("Group by").selectOption("sandbox");
    // The page shows what the API answered it: the same lines and totals (cost to the cent).
    const answered = page.waitForResponse((r) => r.url().includes("/v1/usage?") && r.url().includes("group_by=sandbox"));
    await page.getByRole("button", { name: "Show" }).click();
    const usage = await (await answered).json();
    await page.locator("#usage-total").waitFor();
    expect(usage.lines.map((l: { key: string }) => l.key).sort()).toEqual([web, worker].sort());
    const rowKeys = await page.locator("#usage-table tbody tr th").allTextContents();
    expect(rowKeys).toEqual(usage.lines.map((l: { key: string }) => l.key));
    const cells = await page.locator("#usage-total td").allTextContents();
    expect(cells).toEqual([
      usageAmount(usage.total.vcpu_seconds),
      usageAmount(usage.total.memory_gib_seconds),
      usageAmount(usage.total.disk_gib_seconds),
      usageAmount(usage.total.checkpoint_gib_hours),
      usageAmount(usage.total.volume_gib_hours),
      usageCost(usage.total.cost_usd),
    ]);
    expect(usage.total.vcpu_seconds).toBeGreaterThan(0);
    // The CSV export downloads what GET /v1/usage?format=csv answers: a line per sandbox.
    const download = page.waitForEvent("download");
    await page.getByRole("button", { name: "Download CSV" }).click();
    const csv = readFileSync(await (await download).path(), "utf8")
      .trim()
      .split("\n");
    expect(csv[0]).toMatch(/^key,vcpu_seconds,memory_gib_seconds,disk_gib_seconds,checkpoint_gib_hours,cost_usd/);
    expect(csv.filter((l) => l.startsWith(`${web},`) || l.startsWith(`${worker},`))).toHaveLength(2);
    await shot("dashboard-usage");
  });

  it("serves its bundle from the server with no CDN", async () => {
    const html = await (await fetch(`${t.url}/`)).text();
    expect(html).not.toMatch(/https?:\/\//);
    const js = await fetch(`${t.url}/dashboard/app.js`);
    expect(js.status).toBe(200);
    expect(js.headers.get("content-type")).toMatch(/javascript/);
    expect(js.headers.get("content-security-policy")).toContain("script-src 'self'");
  });
});
