// The browser section of bench/desktop.mjs (docs/desktop.md, "The browser"), in its own sandbox:
//   start_ms:   the browser's cold start by the first open_url (Chromium until its DevTools answer)
//   first_load_ms / load_ms: a page served in the sandbox on loopback, from navigation to its load
//               event (the first, then warm ones), as the guest measured it (the event's result)
//   api_p50_ms: open_url, click_element (by accessible name) and page_text from call to answer
//   in_guest_fetch_p50_ms: the same page fetched over the agent with python3's urllib, no browser
import { stats } from "./stats.mjs";

const PAGE = `<!doctype html><title>bench page</title><p id="out">0</p>
<button onclick="out.textContent = Number(out.textContent) + 1">Count</button>`;
const URL = "http://127.0.0.1:8000/";

const median = (xs) => (xs.length ? stats(xs).p50_ms : null);

/** Measures the browser in a fresh desktop of `display`; deletes it at the end. */
export async function measureBrowser(client, { rounds, display }) {
  const id = (await client.sandboxes.create({ image: "sandtree/desktop", memory_gb: 1.5, display })).id;
  try {
    await client.sandboxes.waitForCreation(id, { timeoutMs: 600_000 });
    await client.desktop.info(id); // answers once the display is up (the page's server starts on it)
    const serve = await client.sandboxes.run(
      id,
      [
        "sh",
        "-c",
        "mkdir -p /srv/b && cat > /srv/b/index.html && exec sandtree-desktop launch python3 -m http.server 8000 --bind 127.0.0.1 --directory /srv/b",
      ],
      { stdin: PAGE },
    );
    if (serve.exit_code !== 0) throw new Error(`serving the page failed (${serve.exit_code}): ${serve.stdout}${serve.stderr}`);
    const timed = async (into, fn) => {
      const t0 = performance.now();
      const r = await fn();
      into.push(performance.now() - t0);
      return r;
    };
    const api = { open_url: [], click_element: [], page_text: [] };
    const coldWall = [];
    const cold = await timed(coldWall, () => client.desktop.openUrl(id, URL, 300_000));
    const loads = [];
    const fetches = [];
    for (let i = 0; i < rounds; i++) {
      loads.push((await timed(api.open_url, () => client.desktop.openUrl(id, URL))).result.load_ms);
      await timed(api.click_element, () => client.desktop.clickElement(id, "Count", { role: "button" }));
      const page = await timed(api.page_text, () => client.desktop.pageText(id));
      if (!page.text.includes("1")) throw new Error(`the click did not count: ${page.text}`);
      const t0 = performance.now();
      const r = await client.sandboxes.run(id, [
        "python3",
        "-c",
        `import urllib.request; urllib.request.urlopen("${URL}").read()`,
      ]);
      fetches.push(performance.now() - t0);
      if (r.exit_code !== 0) throw new Error(`fetching the page failed: ${r.stderr}`);
    }
    return {
      rounds,
      browser_started: cold.result.browser_started,
      start_ms: cold.result.start_ms,
      first_load_ms: cold.result.load_ms,
      first_open_url_api_ms: median(coldWall),
      load_ms_p50: median(loads),
      api_p50_ms: Object.fromEntries(Object.entries(api).map(([k, v]) => [k, median(v)])),
      in_guest_fetch_p50_ms: median(fetches),
    };
  } finally {
    await client.sandboxes.delete(id).catch(() => {});
  }
}
