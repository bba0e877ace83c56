import {
  type DesktopActionInput,
  DesktopEvent,
  DesktopInfo,
  DesktopReplayReport,
  type DesktopReplayRequest,
  DesktopVnc,
  type DesktopWindow,
} from "@sandtree/protocol";
import { InvalidResponseError } from "./errors.js";
import { type HttpClient, parseOrThrow, type RequestOptions } from "./http.js";
import { sandboxPath } from "./sandbox-path.js";

/**
 * Desktop sessions of sandboxes created with `display` (image sandtree/desktop): actions, each
 * recorded as a DesktopEvent in the sandbox's log, the log itself, screenshots, replay and VNC.
 */
export class Desktop {
  constructor(private readonly http: HttpClient) {}

  /** The display's size and whether it runs; ConflictError (NO_DISPLAY) without one. */
  info(id: string, options: RequestOptions = {}): Promise<DesktopInfo> {
    return this.http.json(DesktopInfo, { ...options, method: "GET", path: `${sandboxPath(id)}/desktop` });
  }

  /** Performs one action and answers its event. A failed action throws ValidationError (DESKTOP_ACTION_FAILED). */
  act(id: string, action: DesktopActionInput, options: RequestOptions = {}): Promise<DesktopEvent> {
    // Not retried: an action is not idempotent (a retried "type" would type twice). No client
    // deadline unless asked for: waits end on their own timeout_ms in the guest.
    return this.http.postLong(DesktopEvent, `${sandboxPath(id)}/desktop/actions`, action, options);
  }

  /** Takes a screenshot (an event in the log) and answers it with the PNG, in one request. */
  screenshot(id: string, options: RequestOptions = {}): Promise<{ event: DesktopEvent; png: Uint8Array }> {
    return this.actWithScreen(id, { type: "screenshot" }, options);
  }

  /**
   * Performs one action and answers its event with the PNG of the screen after it, in one request
   * (`Accept: image/png`: the body is the PNG's bytes, the event comes in a header).
   */
  async actWithScreen(
    id: string,
    action: DesktopActionInput,
    options: RequestOptions = {},
  ): Promise<{ event: DesktopEvent; png: Uint8Array }> {
    const { response, body } = await this.http.bytes({
      timeoutMs: 0,
      ...options,
      method: "POST",
      path: `${sandboxPath(id)}/desktop/actions`,
      json: action,
      accept: "image/png",
    });
    if (!(response.headers.get("content-type") ?? "").startsWith("image/png")) {
      // A server that answers PNGs for screenshots only: the event, then its screen's file.
      const event = parseOrThrow(DesktopEvent, JSON.parse(new TextDecoder().decode(body)), "desktop action");
      return { event, png: await this.screenshotFile(id, event.screen_after.sha256, options) };
    }
    const header = response.headers.get("x-sandtree-desktop-event");
    const seq = Number(response.headers.get("x-sandtree-desktop-seq"));
    const event = header
      ? parseOrThrow(DesktopEvent, JSON.parse(Buffer.from(header, "base64url").toString("utf8")), "x-sandtree-desktop-event")
      : (await this.events(id, seq - 1, options)).find((e) => e.seq === seq);
    if (!event) throw new InvalidResponseError(`the desktop answered a PNG without its event (seq ${seq})`);
    return { event, png: body };
  }

  /** A screenshot of the log by its sha256 (as events name them). */
  async screenshotFile(id: string, sha256: string, options: RequestOptions = {}): Promise<Uint8Array> {
    const { body } = await this.http.bytes({
      ...options,
      method: "GET",
      path: `${sandboxPath(id)}/desktop/screenshots/${encodeURIComponent(sha256)}`,
      accept: "image/png",
    });
    return body;
  }

  move(id: string, x: number, y: number, options: RequestOptions = {}): Promise<DesktopEvent> {
    return this.act(id, { type: "move", x, y }, options);
  }

  click(
    id: string,
    at: { x?: number; y?: number; button?: "left" | "middle" | "right"; count?: number } = {},
    options: RequestOptions = {},
  ): Promise<DesktopEvent> {
    return this.act(id, { type: "click", ...at }, options);
  }

  drag(
    id: string,
    from: { x: number; y: number },
    to: { x: number; y: number },
    options: RequestOptions = {},
  ): Promise<DesktopEvent> {
    return this.act(id, { type: "drag", from, to }, options);
  }

  scroll(
    id: string,
    by: { dx?: number; dy?: number; x?: number; y?: number },
    options: RequestOptions = {},
  ): Promise<DesktopEvent> {
    return this.act(id, { type: "scroll", ...by }, options);
  }

  /** Key chords separated by spaces: "ctrl+l", "Return", "ctrl+alt+t". */
  key(id: string, keys: string, options: RequestOptions = {}): Promise<DesktopEvent> {
    return this.act(id, { type: "key", keys }, options);
  }

  type(id: string, text: string, options: RequestOptions = {}): Promise<DesktopEvent> {
    return this.act(id, { type: "type", text }, options);
  }

  waitForWindow(id: string, title: string, timeoutMs = 10_000, options: RequestOptions = {}): Promise<DesktopEvent> {
    return this.act(id, { type: "wait_window", title, timeout_ms: timeoutMs }, options);
  }

  waitForSettle(id: string, quietMs = 500, timeoutMs = 10_000, options: RequestOptions = {}): Promise<DesktopEvent> {
    return this.act(id, { type: "wait_settle", quiet_ms: quietMs, timeout_ms: timeoutMs }, options);
  }

  async cursor(id: string, options: RequestOptions = {}): Promise<{ x: number; y: number }> {
    return (await this.act(id, { type: "cursor" }, options)).pointer;
  }

  async windows(id: string, options: RequestOptions = {}): Promise<DesktopWindow[]> {
    return ((await this.act(id, { type: "windows" }, options)).result?.windows ?? []) as DesktopWindow[];
  }

  /** The focused window's accessibility tree (at-spi); null when its application has none (xterm). */
  async accessibilityTree(id: string, maxDepth = 8, options: RequestOptions = {}): Promise<unknown> {
    return (await this.act(id, { type: "accessibility_tree", max_depth: maxDepth }, options)).result?.tree ?? null;
  }

  /**
   * Opens a page in the desktop's browser (Chromium), starting it first when it is not running.
   * The event's result: {url, title, browser_started, start_ms, load_ms}.
   */
  openUrl(id: string, url: string, timeoutMs = 60_000, options: RequestOptions = {}): Promise<DesktopEvent> {
    return this.act(id, { type: "open_url", url, timeout_ms: timeoutMs }, options);
  }

  /**
   * Clicks the page's element with this accessible name (a button's label, a link's text), and
   * this role when given, with a real pointer click. The event's result: {x, y, role, name}.
   */
  clickElement(
    id: string,
    name: string,
    opts: { role?: string; button?: "left" | "middle" | "right"; timeoutMs?: number } = {},
    options: RequestOptions = {},
  ): Promise<DesktopEvent> {
    const { role, button, timeoutMs } = opts;
    return this.act(
      id,
      {
        type: "click_element",
        name,
        ...(role !== undefined ? { role } : {}),
        ...(button !== undefined ? { button } : {}),
        ...(timeoutMs !== undefined ? { timeout_ms: timeoutMs } : {}),
      },
      options,
    );
  }

  /** The text of the browser's page (its body's innerText, 100,000 characters at most), its URL and title. */
  async pageText(
    id: string,
    options: RequestOptions = {},
  ): Promise<{ url: string; title: string; text: string; truncated: boolean }> {
    const r = (await this.act(id, { type: "page_text" }, options)).result ?? {};
    return {
      url: String(r.url ?? ""),
      title: String(r.title ?? ""),
      text: String(r.text ?? ""),
      truncated: r.truncated === true,
    };
  }

  /** The session's events (with seq greater than `afterSeq`). */
  async events(id: string, afterSeq = 0, options: RequestOptions = {}): Promise<DesktopEvent[]> {
    const { response, mapError, done } = await this.http.open({
      ...options,
      method: "GET",
      path: `${sandboxPath(id)}/desktop/events`,
      query: { after_seq: afterSeq },
      accept: "application/x-ndjson",
    });
    let text: string;
    try {
      text = await response.text();
    } catch (err) {
      throw mapError(err);
    } finally {
      done();
    }
    return text
      .split("\n")
      .filter((l) => l.trim() !== "")
      .map((l) => DesktopEvent.parse(JSON.parse(l)));
  }

  /** Replays a log (another sandbox's, or events) into this sandbox; each step says whether the screen matched. */
  replay(id: string, request: DesktopReplayRequest, options: RequestOptions = {}): Promise<DesktopReplayReport> {
    return this.http.postLong(DesktopReplayReport, `${sandboxPath(id)}/desktop/replay`, request, options);
  }

  /**
   * Where to watch the display live: the dashboard's viewer page (noVNC) and the raw RFB
   * WebSocket behind it (GET .../desktop/vnc, view only unless `interactive`; it takes the API
   * key in the Authorization header, or as the `bearer.<key>` subprotocol). Checks first that
   * the sandbox has a display (ConflictError NO_DISPLAY otherwise).
   */
  async viewUrls(
    id: string,
    opts: { interactive?: boolean } = {},
    options: RequestOptions = {},
  ): Promise<{ viewer_url: string; websocket_url: string; view_only: boolean }> {
    await this.info(id, options);
    const base = this.http.apiUrl;
    const query = opts.interactive ? "?interactive=true" : "";
    return {
      viewer_url: `${base}/#/sandboxes/${encodeURIComponent(id)}/desktop`,
      websocket_url: `${base.replace(/^http/, "ws")}${sandboxPath(id)}/desktop/vnc${query}`,
      view_only: opts.interactive !== true,
    };
  }

  /** Starts VNC in the guest (view-only unless `writable`) and exposes its port; connect with portForward. */
  vnc(id: string, writable = false, options: RequestOptions = {}): Promise<DesktopVnc> {
    return this.http.json(DesktopVnc, { ...options, method: "POST", path: `${sandboxPath(id)}/desktop/vnc`, json: { writable } });
  }
}
