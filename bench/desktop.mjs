#!/usr/bin/env node
// Desktop action round trips, each beside the same work done raw in the guest, in the same run
// (interleaved round by round, so both see the same load):
//   api:       POST /v1/sandboxes/{id}/desktop/actions for click, type (one character) and
//              screenshot, from the call to its answer: the action plus its event (screenshots
//              before and after, the wait for the screen to settle, focused window, pointer);
//              screenshot_png is the screenshot asked as image/png (the PNG's bytes, the event
//              in a header: SDK desktop.screenshot)
//   helper:    the same actions' own time in the guest (event ended_at - started_at)
//   raw:       over the agent (POST exec), with no sandtree desktop code: `xdotool mousemove X Y
//              click 1`, `xdotool type a`, and a plain screenshot (Xvfb's framebuffer copied to a
//              file, no PNG); screenshot_png's raw is the same copy
//   ratio:     api p50 / raw p50 (and p95 / p95) per action: the goal is at most 1.5
//   floor:     bare QEMU (../shared/bench/raw-floor.py, same run and accelerator): `/bin/true`
//              round trip over the serial port
//   browser:   Chromium's start, a page's load, open_url/click_element/page_text (its own sandbox;
//              bench/lib/desktop-browser.mjs)
// Usage: node bench/desktop.mjs [--rounds 10] [--width 800 --height 600] [--browser on|off|only].
// Prints one JSON document; deletes everything it made.
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import path from "node:path";
import { detectAccel } from "@sandtree/host";
import { SandtreeClient } from "@sandtree/sdk";
import { startServer } from "@sandtree/server";
import { benchArgs } from "./lib/args.mjs";
import { measureBrowser } from "./lib/desktop-browser.mjs";
import { measureFloor, ratio } from "./lib/floor.mjs";
import { pct } from "./lib/stats.mjs";

const values = benchArgs({
  rounds: 10,
  width: 800,
  height: 600,
  /** The browser section (bench/lib/desktop-browser.mjs): on, off, or only it. */
  browser: "on",
});
const ROUNDS = values.rounds;
const DISPLAY = { width: values.width, height: values.height };

const ms = (v) => (v === undefined ? null : +v.toFixed(1));
/** `{p50, p95}` in milliseconds of each action's samples. */
const summary = (o) => Object.fromEntries(Object.entries(o).map(([k, v]) => [k, { p50: ms(pct(v, 50)), p95: ms(pct(v, 95)) }]));

async function timed(into, fn) {
  const t0 = performance.now();
  const r = await fn();
  into.push(performance.now() - t0);
  return r;
}

/** Where each action of one round lands: the pointer moves so the screen changes every round. */
const spot = (i) => ({ x: 200 + (i % 5) * 40, y: 250 + (i % 3) * 30 });

/** One round of actions through the API; `helper` gets each event's own time in the guest. */
async function apiRound(client, id, i, api, helper) {
  const own = (into, e) => into.push(Date.parse(e.ended_at) - Date.parse(e.started_at));
  own(helper.click, await timed(api.click, () => client.desktop.click(id, spot(i))));
  own(helper.type, await timed(api.type, () => client.desktop.type(id, "a")));
  own(helper.screenshot, await timed(api.screenshot, () => client.desktop.act(id, { type: "screenshot" })));
  const shot = await timed(api.screenshot_png, () => client.desktop.screenshot(id));
  if (shot.png[1] !== 0x50) throw new Error("the screenshot is not a PNG");
  own(helper.screenshot_png, shot.event);
}

/** The same work with no sandtree desktop code: the command over the agent (POST exec). */
async function rawRound(client, id, i, raw) {
  const inGuest = async (into, command) => {
    const r = await timed(into, () => client.sandboxes.run(id, command, { env: { DISPLAY: ":1" } }));
    if (r.exit_code !== 0) throw new Error(`${command.join(" ")} exited ${r.exit_code}: ${r.stderr}`);
  };
  const { x, y } = spot(i);
  await inGuest(raw.click, ["xdotool", "mousemove", String(x), String(y), "click", "1"]);
  await inGuest(raw.type, ["xdotool", "type", "a"]);
  await inGuest(raw.screenshot, ["sh", "-c", "cat /run/sandtree-desktop/Xvfb_screen0 > /tmp/shot.xwd"]);
  raw.screenshot_png.push(raw.screenshot.at(-1));
}

/** api / raw per action, at p50 and at p95. */
function ratios(api, raw) {
  return Object.fromEntries(
    Object.keys(api).map((k) => [
      k,
      { p50: ratio(pct(api[k], 50), pct(raw[k], 50)), p95: ratio(pct(api[k], 95), pct(raw[k], 95)) },
    ]),
  );
}

const accel = await detectAccel("auto");
const floor = await measureFloor(accel);
const work = mkdtempSync(path.join(tmpdir(), "sandtree-bench-desktop-"));
const server = await startServer({ dataDir: path.join(work, "data"), port: 0, logger: false, network: "off" });
const client = new SandtreeClient({ apiUrl: server.url, apiKey: server.firstKey });
const browserSection = () => measureBrowser(client, { rounds: Math.min(ROUNDS, 5), display: DISPLAY });
if (values.browser === "only") {
  try {
    const browser = await browserSection();
    console.log(JSON.stringify({ accel, load_average_1m: +loadavg()[0].toFixed(2), browser, floor }, null, 2));
  } finally {
    await server.close();
    rmSync(work, { recursive: true, force: true });
  }
  process.exit(0);
}
let id = null;
try {
  id = (await client.sandboxes.create({ image: "sandtree/desktop", memory_gb: 0.75, display: DISPLAY })).id;
  await client.sandboxes.waitForCreation(id, { timeoutMs: 600_000 });
  await client.desktop.key(id, "ctrl+alt+t");
  await client.desktop.waitForWindow(id, "terminal", 60_000);
  const actions = () => ({ click: [], type: [], screenshot: [], screenshot_png: [] });
  const api = actions();
  const helper = actions();
  const raw = actions();
  const loadBefore = +loadavg()[0].toFixed(2);
  // One warm-up round of each (the helper's session and X connection open on first use).
  await apiRound(client, id, 0, actions(), actions());
  await rawRound(client, id, 0, actions());
  for (let i = 0; i < ROUNDS; i++) {
    await apiRound(client, id, i, api, helper);
    await rawRound(client, id, i, raw);
  }
  const out = {
    rounds: ROUNDS,
    display: DISPLAY,
    accel,
    load_average_1m: { before: loadBefore, after: +loadavg()[0].toFixed(2) },
    api_ms: summary(api),
    helper_in_guest_ms: summary(helper),
    raw_over_agent_ms: summary(raw),
    api_over_raw: ratios(api, raw),
    floor,
  };
  if (values.browser === "on") out.browser = await browserSection();
  console.log(JSON.stringify(out, null, 2));
} finally {
  if (id) await client.sandboxes.delete(id).catch(() => {});
  await server.close();
  rmSync(work, { recursive: true, force: true });
}
