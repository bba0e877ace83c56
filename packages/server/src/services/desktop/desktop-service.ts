import { DESKTOP_VNC_PORT, type DesktopAction, DesktopEvent, DesktopInfo, SandtreeError } from "@sandtree/protocol";
import type { ExecService } from "../commands/exec-service.js";
import type { FileService } from "../files/file-service.js";
import { parseDisplay } from "../images/image-defaults.js";
import type { Logger } from "../observability/logger.js";
import type { SandboxService, SandboxStart } from "../sandboxes/sandbox-service.js";
import { type HelperAnswer, HelperSession } from "./helper-session.js";
import { openVncStream, type VncStream } from "./vnc-stream.js";

/** The guest helper carried by sandtree/desktop (scripts/desktop/sandtree-desktop). */
const HELPER = "/usr/local/bin/sandtree-desktop";
/** Where the helper keeps the event log and screenshots: on the guest's disk, so checkpoints carry them. */
export const DESKTOP_STATE_DIR = "/var/lib/sandtree/desktop";
const EXIT_NO_DISPLAY = 3;
const EXIT_FAILED = 4;
const EXIT_NOT_FOUND = 127;

export interface DesktopServiceDeps {
  sandboxes: SandboxService;
  exec: ExecService;
  files: FileService;
  log: Logger;
}

/**
 * Desktop sessions (docs/desktop.md). Everything happens in the guest through the exec and file
 * services: the helper brings the display up, performs each action and appends its event to a
 * log on the guest's disk, with the screenshots beside it. Nothing of a session is kept here but
 * caches, so checkpoints, forks and server restarts carry a session as they carry the disk.
 */
export class DesktopService {
  /** Displays being brought up as their sandbox starts (actions wait for them). */
  private readonly arranging = new Map<string, Promise<void>>();
  private readonly arrangeFailed = new Map<string, string>();
  /** The display of each sandbox (it never changes; a fork has its parent's). */
  private readonly displays = new Map<string, DesktopInfo>();
  /** The long-lived helper of each desktop that actions go through (HelperSession). */
  private readonly sessions = new Map<string, HelperSession>();
  /** Desktops whose helper has no `serve` (an image made from an older sandtree/desktop): one-shot actions. */
  private readonly noSession = new Set<string>();

  constructor(private readonly deps: DesktopServiceDeps) {
    deps.sandboxes.onStart((start) => this.onStart(start));
    deps.sandboxes.onTeardown((id) => this.forget(id));
  }

  /**
   * Every sandbox that comes up (SandboxService.onStart): a create with `display` gets its display
   * configured and brought up; a sandbox booted from a checkpoint's disk (a filesystem fork or
   * restore) gets the display its disk records brought up again (a no-op without one: the helper
   * answers 3, or 127 in an image without it). A memory restore, fork or reset resumes the display
   * with its processes, and a machine adopted after a restart kept running: nothing to do.
   */
  onStart(start: SandboxStart): void {
    const { sandbox, params, restored } = start;
    // A reset replaced the machine under the same id: its helper session went with it.
    this.dropSession(sandbox.id);
    const asked = params?.display;
    // A fresh sandbox without `display` may get its image's (label sandtree.display), known once
    // the image is resolved: the sandbox's record says, when it runs.
    if (asked === undefined && restored === "memory") return;
    const done = (async () => {
      await start.ready;
      const current = await this.deps.sandboxes.get(sandbox.team_id, sandbox.id);
      if (current.status !== "RUNNING") return;
      const display = asked ?? (restored === "none" ? (parseDisplay(current.display ?? "") ?? undefined) : undefined);
      if (display === undefined && restored !== "disk") return;
      const args = display ? ["start", String(display.width), String(display.height)] : ["up"];
      if (asked?.accessibility) args.push("--accessibility");
      const r = await this.exec(sandbox.team_id, sandbox.id, args);
      if (r.exit_code === 0 || (!display && (r.exit_code === EXIT_NO_DISPLAY || r.exit_code === EXIT_NOT_FOUND))) return;
      throw new Error(helperError(r.stdout) ?? (r.stderr.trim().slice(-500) || `exit code ${r.exit_code}`));
    })()
      .catch((err: Error) => {
        this.arrangeFailed.set(sandbox.id, err.message);
        this.deps.log.warn({ sandbox: sandbox.id, err: err.message }, "desktop display did not start");
      })
      .finally(() => this.arranging.delete(sandbox.id));
    this.arranging.set(sandbox.id, done);
  }

  /** Drops what is cached of a sandbox that ended. */
  forget(id: string): void {
    this.displays.delete(id);
    this.arrangeFailed.delete(id);
    this.dropSession(id);
    this.noSession.delete(id);
  }

  private dropSession(id: string): void {
    this.sessions.get(id)?.close();
    this.sessions.delete(id);
  }

  /**
   * An action through the desktop's long-lived helper (started on first use); null when there is
   * none to use (the caller then runs a one-shot exec). A session that ended (its machine was reset
   * or replaced) is dropped: should it end with an action sent, that action is run again one-shot,
   * on the machine that replaced it.
   */
  private async viaSession(teamId: string, id: string, actionJson: string, png: boolean): Promise<HelperAnswer | null> {
    if (this.noSession.has(id)) return null;
    let session = this.sessions.get(id);
    if (!session?.alive) {
      session = new HelperSession(await this.deps.sandboxes.running(teamId, id), HELPER);
      this.sessions.set(id, session);
    }
    const answer = await session.run(actionJson, { png });
    if (answer === null) {
      if (this.sessions.get(id) === session) this.sessions.delete(id);
      session.close();
      // Gone before it ever answered: this helper cannot serve.
      if (!session.answered) this.noSession.add(id);
    }
    return answer;
  }

  /** The display's size and state; 409 NO_DISPLAY when the sandbox has none. */
  async info(teamId: string, id: string): Promise<DesktopInfo> {
    const r = await this.helper(teamId, id, ["info"]);
    const info = DesktopInfo.parse(JSON.parse(r));
    this.displays.set(id, info);
    return info;
  }

  private async display(teamId: string, id: string): Promise<DesktopInfo> {
    return this.displays.get(id) ?? (await this.info(teamId, id));
  }

  /** Performs one action and answers its event; a failed action is 422 with its event in details. */
  async act(teamId: string, id: string, action: DesktopAction, opts: { check?: boolean } = {}): Promise<DesktopEvent> {
    return (await this.perform(teamId, id, action, { ...opts, png: false })).event;
  }

  /**
   * Performs one action and answers its event with the PNG of the screen after it: through the
   * helper's session in the same answer (an older helper's from its file, read afterwards).
   */
  async actForPng(teamId: string, id: string, action: DesktopAction): Promise<{ event: DesktopEvent; png: Buffer }> {
    const { event, png } = await this.perform(teamId, id, action, { png: true });
    return { event, png: png ?? (await this.screenshot(teamId, id, event.screen_after.sha256)) };
  }

  private async perform(
    teamId: string,
    id: string,
    action: DesktopAction,
    opts: { check?: boolean; png: boolean },
  ): Promise<{ event: DesktopEvent; png?: Buffer | undefined }> {
    const display = await this.display(teamId, id);
    checkCoordinates(action, display);
    const out = await this.helper(teamId, id, ["act"], JSON.stringify(action), {
      allowFailure: true,
      session: true,
      png: opts.png,
    });
    const event = parseEvent(out.stdout);
    if (!event.ok && opts.check !== false) {
      throw new SandtreeError("DESKTOP_ACTION_FAILED", `${action.type} failed: ${event.error ?? "unknown error"}`, {
        event,
      });
    }
    return { event, png: out.png };
  }

  /** The session's event log (JSONL lines, each a DesktopEvent), from after `afterSeq`. */
  async events(teamId: string, id: string, afterSeq = 0): Promise<DesktopEvent[]> {
    await this.display(teamId, id);
    let text: string;
    try {
      text = (await this.read(teamId, id, `${DESKTOP_STATE_DIR}/events.jsonl`)).toString("utf8");
    } catch (err) {
      if (err instanceof SandtreeError && err.code === "FILE_NOT_FOUND") return [];
      throw err;
    }
    return text
      .split("\n")
      .filter((l) => l.trim() !== "")
      .map((l) => parseEvent(l))
      .filter((e) => e.seq > afterSeq);
  }

  /** A screenshot of the log, by its PNG's sha256. */
  async screenshot(teamId: string, id: string, sha256: string): Promise<Buffer> {
    if (!/^[0-9a-f]{64}$/.test(sha256)) {
      throw new SandtreeError("VALIDATION_FAILED", "sha256: 64 hex digits", { field: "sha256" });
    }
    await this.display(teamId, id);
    try {
      return await this.read(teamId, id, `${DESKTOP_STATE_DIR}/shots/${sha256}.png`);
    } catch (err) {
      if (err instanceof SandtreeError && err.code === "FILE_NOT_FOUND") {
        throw new SandtreeError("NOT_FOUND", `no screenshot ${sha256} in sandbox ${id}`, { sha256 });
      }
      throw err;
    }
  }

  /** Starts x11vnc in the guest on DESKTOP_VNC_PORT (view-only unless writable). */
  async startVnc(teamId: string, id: string, writable: boolean): Promise<{ port: number; view_only: boolean }> {
    const args = ["vnc", String(DESKTOP_VNC_PORT)];
    if (writable) args.push("--writable");
    const r = JSON.parse(await this.helper(teamId, id, args)) as { port: number; view_only: boolean };
    return r;
  }

  /**
   * A live VNC connection to the display over the agent (GET .../desktop/vnc): one x11vnc per
   * client, view only unless `interactive`. 409 NO_DISPLAY without a display.
   */
  async openVnc(teamId: string, id: string, interactive: boolean): Promise<VncStream> {
    await this.display(teamId, id);
    return openVncStream(await this.deps.sandboxes.running(teamId, id), HELPER, interactive, id);
  }

  private async read(teamId: string, id: string, p: string): Promise<Buffer> {
    const { chunks } = await this.deps.files.download(teamId, id, p, {});
    const parts: Buffer[] = [];
    for await (const c of chunks) parts.push(Buffer.from(c));
    return Buffer.concat(parts);
  }

  private exec(teamId: string, id: string, args: string[], stdin?: string) {
    return this.deps.exec.runBuffered(teamId, id, {
      command: [HELPER, ...args],
      env: {},
      stdin_open: false,
      ...(stdin !== undefined ? { stdin } : {}),
    });
  }

  /** Runs the helper; NO_DISPLAY when the sandbox has no display (or no helper), else its stdout. */
  private async helper(teamId: string, id: string, args: string[], stdin?: string): Promise<string>;
  private async helper(
    teamId: string,
    id: string,
    args: string[],
    stdin: string,
    opts: { allowFailure: true; session?: boolean; png?: boolean },
  ): Promise<{ stdout: string; exitCode: number; png?: Buffer | undefined }>;
  private async helper(
    teamId: string,
    id: string,
    args: string[],
    stdin?: string,
    opts: { allowFailure?: boolean; session?: boolean; png?: boolean } = {},
  ): Promise<string | { stdout: string; exitCode: number; png?: Buffer | undefined }> {
    await this.arranging.get(id);
    const viaSession = opts.session && stdin !== undefined ? await this.viaSession(teamId, id, stdin, opts.png === true) : null;
    const r = viaSession ? { ...viaSession, stderr: "" } : await this.exec(teamId, id, args, stdin);
    if (r.exit_code === EXIT_NO_DISPLAY || r.exit_code === EXIT_NOT_FOUND) {
      const failed = this.arrangeFailed.get(id);
      throw new SandtreeError(
        "NO_DISPLAY",
        failed
          ? `sandbox ${id}'s display did not start: ${failed}`
          : r.exit_code === EXIT_NOT_FOUND
            ? `sandbox ${id} has no desktop: create it from sandtree/desktop with display: {width, height}`
            : `sandbox ${id} has no display: create it with display: {width, height}`,
        { id },
      );
    }
    if (opts.allowFailure && (r.exit_code === 0 || r.exit_code === EXIT_FAILED)) {
      return { stdout: r.stdout, exitCode: r.exit_code ?? -1, png: viaSession?.png };
    }
    if (r.exit_code !== 0) {
      const why = helperError(r.stdout) ?? r.stderr.trim().slice(-500);
      throw new SandtreeError(
        r.exit_code === EXIT_FAILED ? "DESKTOP_ACTION_FAILED" : "GUEST_ERROR",
        `sandtree-desktop ${args[0]} exited with ${r.exit_code}: ${why}`,
      );
    }
    return r.stdout;
  }
}

function helperError(stdout: string): string | undefined {
  try {
    return (JSON.parse(stdout) as { error?: { message?: string } }).error?.message;
  } catch {
    return undefined;
  }
}

function parseEvent(line: string): DesktopEvent {
  let json: unknown;
  try {
    json = JSON.parse(line);
  } catch {
    throw new SandtreeError("GUEST_ERROR", `the desktop helper answered something that is not JSON: ${line.slice(0, 200)}`);
  }
  const r = DesktopEvent.safeParse(json);
  if (!r.success) {
    const why = helperError(line) ?? r.error.issues[0]?.message ?? "invalid";
    throw new SandtreeError("GUEST_ERROR", `the desktop helper answered an invalid event: ${why}`);
  }
  return r.data;
}

/** 400 OUT_OF_DISPLAY naming the field when a coordinate falls outside the display. */
export function checkCoordinates(action: DesktopAction, display: { width: number; height: number }): void {
  const points: Array<[string, number | undefined, number | undefined]> = [];
  if (action.type === "move" || action.type === "click" || action.type === "scroll") points.push(["", action.x, action.y]);
  if (action.type === "drag") points.push(["from.", action.from.x, action.from.y], ["to.", action.to.x, action.to.y]);
  for (const [prefix, x, y] of points) {
    for (const [axis, v, max] of [
      ["x", x, display.width],
      ["y", y, display.height],
    ] as const) {
      if (v !== undefined && v >= max) {
        throw new SandtreeError(
          "OUT_OF_DISPLAY",
          `${prefix}${axis}: ${v} is outside the ${display.width}x${display.height} display (0..${max - 1})`,
          { field: `${prefix}${axis}`, display: { width: display.width, height: display.height } },
        );
      }
    }
  }
}
