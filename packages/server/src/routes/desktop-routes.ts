import {
  DESKTOP_VNC_PORT,
  DesktopAction,
  DesktopActionQuery,
  DesktopEventsQuery,
  DesktopReplayRequest,
  DesktopVncRequest,
  SandtreeError,
} from "@sandtree/protocol";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { parse } from "../errors.js";
import { replayEvents } from "../services/desktop/desktop-replay.js";
import type { Services } from "../services/services.js";

const Params = z.object({ id: z.string().min(1).max(64) });
const ShotParams = z.object({ id: z.string().min(1).max(64), sha256: z.string().regex(/^[0-9a-f]{64}$/, "64 hex digits") });

/** A malformed action: 400 naming the field ("type" when the action is not one we know). */
function parseAction(body: unknown) {
  if (body === null || typeof body !== "object" || Array.isArray(body)) {
    throw new SandtreeError("VALIDATION_FAILED", "the body is one action, a JSON object with a type", { field: "type" });
  }
  return parse(DesktopAction, body);
}

/** Desktop sessions: actions, their event log and screenshots, replay, and VNC (docs/desktop.md). */
export function desktopRoutes(app: FastifyInstance, s: Services): void {
  app.get("/v1/sandboxes/:id/desktop", async (req) => {
    const { id } = parse(Params, req.params);
    return s.desktop.info(req.principal.teamId, id);
  });

  // One action; its event is the answer. Asked as a PNG (`Accept: image/png` or `?format=png`), the
  // answer is the PNG of the screen after it, as bytes (the helper hands them over with the event);
  // the event rides in headers: its seq, the PNG's hash, and the whole event as base64url JSON.
  app.post("/v1/sandboxes/:id/desktop/actions", async (req, reply) => {
    const { id } = parse(Params, req.params);
    const { format } = parse(DesktopActionQuery, req.query ?? {});
    const action = parseAction(req.body);
    const wantsPng = format === "png" || (format === undefined && String(req.headers.accept ?? "").includes("image/png"));
    if (!wantsPng) return s.desktop.act(req.principal.teamId, id, action);
    const { event, png } = await s.desktop.actForPng(req.principal.teamId, id, action);
    return reply
      .header("content-type", "image/png")
      .header("x-sandtree-desktop-seq", String(event.seq))
      .header("x-sandtree-screenshot-sha256", event.screen_after.sha256)
      .header("x-sandtree-desktop-event", Buffer.from(JSON.stringify(event)).toString("base64url"))
      .send(png);
  });

  app.get("/v1/sandboxes/:id/desktop/events", async (req, reply) => {
    const { id } = parse(Params, req.params);
    const { after_seq } = parse(DesktopEventsQuery, req.query);
    const events = await s.desktop.events(req.principal.teamId, id, after_seq);
    return reply.header("content-type", "application/x-ndjson").send(events.map((e) => `${JSON.stringify(e)}\n`).join(""));
  });

  app.get("/v1/sandboxes/:id/desktop/screenshots/:sha256", async (req, reply) => {
    const { id, sha256 } = parse(ShotParams, req.params);
    const png = await s.desktop.screenshot(req.principal.teamId, id, sha256);
    return reply.header("content-type", "image/png").header("cache-control", "private, max-age=31536000, immutable").send(png);
  });

  app.post("/v1/sandboxes/:id/desktop/replay", async (req) => {
    const { id } = parse(Params, req.params);
    const body = parse(DesktopReplayRequest, req.body ?? {});
    const team = req.principal.teamId;
    const events = body.source_sandbox_id
      ? await s.desktop.events(team, body.source_sandbox_id, body.after_seq)
      : (body.events ?? []).filter((e) => e.seq > body.after_seq);
    return replayEvents(s.desktop, team, id, events, {
      sourceId: body.source_sandbox_id,
      channelTolerance: body.channel_tolerance,
      maxDiffRatio: body.max_diff_ratio,
      stopOnMismatch: body.stop_on_mismatch,
    });
  });

  // VNC: x11vnc in the guest (view-only unless writable), its port exposed like any other
  // (a fresh token each call); `sandtree sandbox port-forward ID 5900 --token T` reaches it.
  app.post("/v1/sandboxes/:id/desktop/vnc", async (req, reply) => {
    const { id } = parse(Params, req.params);
    const { writable } = parse(DesktopVncRequest, req.body ?? {});
    const team = req.principal.teamId;
    // Exposing first: a sandbox without a network answers 409 NETWORK_DISABLED before VNC starts.
    const exposed = await s.ports.expose(team, id, DESKTOP_VNC_PORT);
    const vnc = await s.desktop.startVnc(team, id, writable);
    const base = `${req.protocol}://${req.host}`;
    return reply.status(201).send({
      sandbox_id: id,
      port: vnc.port,
      view_only: vnc.view_only,
      tcp_url: `${base.replace(/^http/, "ws")}/tcp/${encodeURIComponent(id)}/${vnc.port}`,
      token: exposed.token,
    });
  });
}
