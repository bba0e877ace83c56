import { z } from "zod";
import { ExposedPort } from "./network.js";

/** The display a sandbox is created with (`display` in the create request). */
export const DEFAULT_DISPLAY = { width: 1280, height: 800 } as const;
export const DisplaySize = z.strictObject({
  width: z.number().int().min(320, "at least 320 pixels").max(3840, "at most 3840 pixels").default(DEFAULT_DISPLAY.width),
  height: z.number().int().min(240, "at least 240 pixels").max(2160, "at most 2160 pixels").default(DEFAULT_DISPLAY.height),
  /** Look up the accessible element under the pointer for every event (slower: at-spi per action). */
  accessibility: z.boolean().default(false),
});
export type DisplaySizeInput = z.input<typeof DisplaySize>;
export type DisplaySize = z.output<typeof DisplaySize>;

const coord = z.number().int().min(0).max(3839);
export const Point = z.strictObject({ x: coord, y: coord });
export type Point = z.infer<typeof Point>;
const button = z.enum(["left", "middle", "right"]).default("left");
const bothOrNeither = (a: { x?: number | undefined; y?: number | undefined }) => (a.x === undefined) === (a.y === undefined);
const bothMessage = { message: "give both x and y, or neither", path: ["x"] };
/** One chord or several separated by spaces, e.g. "ctrl+l", "Return", "ctrl+alt+t", "Down Down Return". */
const KEYS = /^[A-Za-z0-9_]+(\+[A-Za-z0-9_]+)*( [A-Za-z0-9_]+(\+[A-Za-z0-9_]+)*)*$/;

/** What the browser may open: a web page (http, https), a file in the guest (file) or about:blank. */
const BrowserUrl = z
  .string()
  .max(8192)
  .refine((u) => URL.canParse(u) && ["http:", "https:", "file:", "about:"].includes(new URL(u).protocol), {
    message: "an absolute http, https, file or about URL",
  });

export const DesktopAction = z.discriminatedUnion("type", [
  z.strictObject({ type: z.literal("screenshot") }),
  z.strictObject({ type: z.literal("move"), x: coord, y: coord }),
  z
    .strictObject({
      type: z.literal("click"),
      x: coord.optional(),
      y: coord.optional(),
      button,
      count: z.number().int().min(1).max(3).default(1),
    })
    .refine(bothOrNeither, bothMessage),
  z.strictObject({ type: z.literal("drag"), from: Point, to: Point, button }),
  z
    .strictObject({
      type: z.literal("scroll"),
      x: coord.optional(),
      y: coord.optional(),
      /** Wheel steps: positive scrolls down (dy) or right (dx). */
      dx: z.number().int().min(-50).max(50).default(0),
      dy: z.number().int().min(-50).max(50).default(0),
    })
    .refine(bothOrNeither, bothMessage)
    .refine((a) => a.dx !== 0 || a.dy !== 0, { message: "give dx or dy (wheel steps, not both 0)", path: ["dy"] }),
  z.strictObject({
    type: z.literal("key"),
    keys: z.string().max(256).regex(KEYS, "key chords such as ctrl+l or Return, separated by spaces"),
  }),
  z.strictObject({
    type: z.literal("type"),
    text: z
      .string()
      .min(1)
      .max(10_000)
      .refine((t) => !t.includes("\0"), "must not contain NUL"),
    delay_ms: z.number().int().min(0).max(1000).default(12),
  }),
  z.strictObject({
    type: z.literal("wait_window"),
    /** A substring of the window's title. */
    title: z.string().min(1).max(256),
    timeout_ms: z.number().int().min(1).max(300_000).default(10_000),
  }),
  z.strictObject({
    type: z.literal("wait_settle"),
    quiet_ms: z.number().int().min(50).max(60_000).default(500),
    timeout_ms: z.number().int().min(1).max(300_000).default(10_000),
  }),
  z.strictObject({ type: z.literal("cursor") }),
  z.strictObject({ type: z.literal("windows") }),
  z.strictObject({ type: z.literal("accessibility_tree"), max_depth: z.number().int().min(0).max(32).default(8) }),
  // The browser (Chromium in sandtree/desktop): started by the first open_url (or ctrl+alt+b).
  z.strictObject({
    type: z.literal("open_url"),
    url: BrowserUrl,
    /** Covers starting the browser when it is not running (tens of seconds under TCG) and the page's load. */
    timeout_ms: z.number().int().min(1).max(300_000).default(60_000),
  }),
  z.strictObject({
    type: z.literal("click_element"),
    /** The element's accessible name, exactly (a button's label, a link's text, an input's label). */
    name: z.string().min(1).max(1024),
    /** Its accessibility role, e.g. "button", "link", "textbox" (any role when absent). */
    role: z
      .string()
      .regex(/^[A-Za-z]{1,64}$/, "a role such as button, link or textbox")
      .optional(),
    button,
    /** How long to wait for the element to appear on the page. */
    timeout_ms: z.number().int().min(1).max(300_000).default(10_000),
  }),
  z.strictObject({ type: z.literal("page_text"), timeout_ms: z.number().int().min(1).max(300_000).default(10_000) }),
]);
export type DesktopActionInput = z.input<typeof DesktopAction>;
export type DesktopAction = z.output<typeof DesktopAction>;
export const DESKTOP_ACTION_TYPES = DesktopAction.options.map((o) => o.shape.type.value);

export const DesktopWindow = z.object({
  id: z.string(),
  title: z.string(),
  class: z.string(),
  x: z.number().int(),
  y: z.number().int(),
  width: z.number().int(),
  height: z.number().int(),
  focused: z.boolean(),
});
export type DesktopWindow = z.infer<typeof DesktopWindow>;

const Bounds = z.object({ x: z.number().int(), y: z.number().int(), width: z.number().int(), height: z.number().int() });
export interface AccessibleNode {
  role: string;
  name: string;
  bounds: z.infer<typeof Bounds> | null;
  children?: AccessibleNode[] | undefined;
}
export const AccessibleNode: z.ZodType<AccessibleNode> = z.lazy(() =>
  z.object({ role: z.string(), name: z.string(), bounds: Bounds.nullable(), children: z.array(AccessibleNode).optional() }),
);

const sha256 = z.string().regex(/^[0-9a-f]{64}$/, "a sha256 in hex");
/** A screenshot, by the sha256 of its PNG; the PNG is kept beside the log in the guest. */
export const ScreenRef = z.object({ sha256 });

/**
 * One action of a desktop session, as recorded in the sandbox's event log. `seq` grows by one per
 * action and carries on in forks; times are the guest's clock (ISO 8601, UTC).
 */
export const DesktopEvent = z.object({
  seq: z.number().int().min(1),
  started_at: z.iso.datetime(),
  ended_at: z.iso.datetime(),
  action: DesktopAction,
  ok: z.boolean(),
  /** What the action answered: {} for input actions, {windows} for windows, {x, y} for cursor... */
  result: z.record(z.string(), z.unknown()).nullable(),
  /** Why the action failed (ok false), e.g. a wait_window that timed out. */
  error: z.string().nullable(),
  screen_before: ScreenRef,
  /** Taken once the screen stopped changing (250 ms quiet, 3 s at most) after the action. */
  screen_after: ScreenRef,
  focused_window: z.object({ title: z.string(), class: z.string() }).nullable(),
  pointer: z.object({ x: z.number().int(), y: z.number().int() }),
  /** The accessible element under the pointer (at-spi), when the display has `accessibility` on and one answers. */
  element: z.object({ role: z.string(), name: z.string(), bounds: Bounds.nullable() }).nullable(),
  display: z.object({ width: z.number().int(), height: z.number().int() }),
});
export type DesktopEvent = z.infer<typeof DesktopEvent>;

/** GET /v1/sandboxes/{id}/desktop */
export const DesktopInfo = z.object({
  width: z.number().int(),
  height: z.number().int(),
  accessibility: z.boolean(),
  running: z.boolean(),
  vnc: z.boolean(),
});
export type DesktopInfo = z.infer<typeof DesktopInfo>;

/** POST .../desktop/actions?format=png: the answer is the PNG of the screen after the action (as `Accept: image/png`). */
export const DesktopActionQuery = z.strictObject({
  format: z.enum(["json", "png"]).optional(),
});

export const DesktopEventsQuery = z.strictObject({
  /** Only events with seq greater than this. */
  after_seq: z.coerce.number().int().min(0).default(0),
});

export const DesktopReplayRequest = z
  .strictObject({
    /** A sandbox whose log (and screenshots) to replay; it must be running to read its screenshots. */
    source_sandbox_id: z.string().min(1).max(64).optional(),
    /** Or the events themselves (exact hashes are compared; no pixel difference without the images). */
    events: z.array(DesktopEvent).max(10_000).optional(),
    /** Replay only events with seq greater than this (a fork replays what followed its fork point). */
    after_seq: z.number().int().min(0).default(0),
    /** A pixel counts as changed when a channel differs by more than this (0-255). */
    channel_tolerance: z.number().int().min(0).max(255).default(16),
    /** A step matches when at most this fraction of pixels changed. */
    max_diff_ratio: z.number().min(0).max(1).default(0.005),
    /** Stop at the first step that does not match. */
    stop_on_mismatch: z.boolean().default(false),
  })
  .refine((r) => (r.source_sandbox_id === undefined) !== (r.events === undefined), {
    message: "give source_sandbox_id or events, not both",
    path: ["source_sandbox_id"],
  });
export type DesktopReplayRequest = z.input<typeof DesktopReplayRequest>;

export const DesktopReplayStep = z.object({
  seq: z.number().int(),
  type: z.string(),
  ok: z.boolean(),
  expected_sha256: z.string(),
  actual_sha256: z.string(),
  exact: z.boolean(),
  /** Fraction of pixels that differ beyond channel_tolerance (null: no reference image to compare). */
  diff_ratio: z.number().nullable(),
  match: z.boolean(),
});
export type DesktopReplayStep = z.infer<typeof DesktopReplayStep>;

export const DesktopReplayReport = z.object({
  sandbox_id: z.string(),
  total: z.number().int(),
  matched: z.number().int(),
  all_match: z.boolean(),
  steps: z.array(DesktopReplayStep),
});
export type DesktopReplayReport = z.infer<typeof DesktopReplayReport>;

export const DesktopVncRequest = z.strictObject({
  /** Let the viewer type and click (default: view only). */
  writable: z.boolean().default(false),
});

/** POST /v1/sandboxes/{id}/desktop/vnc: the VNC port, exposed (token shown once) and reachable at tcp_url. */
export const DesktopVnc = ExposedPort.pick({ sandbox_id: true, port: true, tcp_url: true, token: true }).extend({
  view_only: z.boolean(),
});
export type DesktopVnc = z.infer<typeof DesktopVnc>;

/** GET /v1/sandboxes/{id}/desktop/vnc (a WebSocket of raw RFB bytes): view only unless `interactive=true`. */
export const DesktopVncQuery = z.strictObject({
  interactive: z
    .enum(["true", "false"], { message: "interactive: true or false" })
    .default("false")
    .transform((v) => v === "true"),
});

/** The guest port x11vnc listens on. */
export const DESKTOP_VNC_PORT = 5900;
