import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { Duplex } from "node:stream";
import { MachinePortError } from "@sandtree/host";
import { type Sandbox, SandtreeError, TERMINAL_STATUSES } from "@sandtree/protocol";
import type { ExposedPortRow } from "../../store/rows.js";
import type { Store } from "../../store/store.js";
import type { SandboxService } from "../sandboxes/sandbox-service.js";

/** An exposed port as the service hands it out; `token` only right after exposing. */
export interface ExposedPortInfo {
  sandbox_id: string;
  port: number;
  created_at: string;
  token?: string;
}

/** Where a proxied connection goes: the sandbox and the port. */
export interface PortTarget {
  sandbox: Sandbox;
  port: number;
}

/** How the service reaches sandboxes' guests (server-services: the network and the machines). */
export interface GuestPorts {
  /** Whether the sandbox is attached to this server's sandbox networks with its network on. */
  hasNetwork(sandboxId: string): boolean;
  /** A byte stream to a port of the sandbox's running machine (Machine.connect; NETWORK_DISABLED without a network). */
  connect(sb: Sandbox, port: number, opts?: { signal?: AbortSignal }): Promise<Duplex>;
}

function sha256(token: string): Buffer {
  return createHash("sha256").update(token, "utf8").digest();
}

/**
 * Ports of a sandbox reachable from outside through the server (`/ports/...` HTTP and
 * WebSocket proxy, `/tcp/...` raw TCP over a WebSocket). Each exposed port has its own bearer
 * token: 32 random bytes (base64url), shown once, stored only as its sha256; exposing the port
 * again rotates it. Connections go through the sandbox's machine (`open`), never dialed here.
 */
export class PortService {
  constructor(
    private readonly store: Store,
    private readonly sandboxes: SandboxService,
    private readonly guests: GuestPorts,
  ) {
    // Exposed ports end with their sandbox.
    sandboxes.onTeardown((id) => this.forget(id));
  }

  /** Exposes the port (or rotates its token) and returns it with the new token. */
  async expose(teamId: string, id: string, port: number): Promise<ExposedPortInfo> {
    const sb = await this.sandboxes.get(teamId, id);
    refuseEnded(sb);
    // While it boots a sandbox may not be attached yet; once up, not attached means no network.
    if ((sb.status === "RUNNING" || sb.status === "PAUSED") && !this.guests.hasNetwork(id)) throw networkDisabled(id);
    const token = randomBytes(32).toString("base64url");
    const row = await this.store.upsertExposedPort({
      sandbox_id: id,
      port,
      token_sha256: sha256(token).toString("hex"),
      created_at: new Date().toISOString(),
    });
    // Ended meanwhile: its teardown may have dropped its ports before this row was written.
    const now = await this.store.getSandbox(id);
    if (!now || TERMINAL_STATUSES.includes(now.status)) {
      await this.store.deleteExposedPort(id, port);
      refuseEnded(now ?? { ...sb, status: "TERMINATED" });
    }
    return { ...info(row), token };
  }

  /** The sandbox's exposed ports (never their tokens); none once it ended. */
  async list(teamId: string, id: string): Promise<ExposedPortInfo[]> {
    const sb = await this.sandboxes.get(teamId, id);
    if (TERMINAL_STATUSES.includes(sb.status)) return [];
    return (await this.store.listExposedPorts(id)).map(info);
  }

  /** Stops exposing the port: its token stops working at once. 404 PORT_NOT_FOUND if it was not exposed. */
  async unexpose(teamId: string, id: string, port: number): Promise<void> {
    const sb = await this.sandboxes.get(teamId, id);
    const removed = await this.store.deleteExposedPort(id, port);
    if (!removed || TERMINAL_STATUSES.includes(sb.status)) throw portNotFound(id, port);
  }

  /** Drops every exposed port of a sandbox (its teardown). */
  async forget(sandboxId: string): Promise<void> {
    await this.store.deleteExposedPorts(sandboxId);
  }

  /**
   * Checks a token for a port (timing-safe) and answers where to connect. 404 PORT_NOT_FOUND
   * when the sandbox is unknown, ended or the port not exposed; 401 PORT_TOKEN_INVALID for a
   * missing or wrong token; 409 when the sandbox is not running (one without a network: its
   * machine's connect says NETWORK_DISABLED).
   */
  async authorize(sandboxId: string, port: number, token: string | undefined): Promise<PortTarget> {
    const sb = await this.store.getSandbox(sandboxId);
    const row = sb && !TERMINAL_STATUSES.includes(sb.status) ? await this.store.getExposedPort(sandboxId, port) : undefined;
    if (!sb || !row) throw portNotFound(sandboxId, port);
    const expected = Buffer.from(row.token_sha256, "hex");
    const given = sha256(token ?? "");
    if (!token || expected.length !== given.length || !timingSafeEqual(expected, given)) {
      throw new SandtreeError("PORT_TOKEN_INVALID", `missing or wrong token for port ${port} of sandbox ${sandboxId}`, {
        id: sandboxId,
        port,
      });
    }
    return this.target(sb, port);
  }

  /** A sandbox that has not ended, found by id alone (the ways in hold no team), else undefined. */
  async live(sandboxId: string): Promise<Sandbox | undefined> {
    const sb = await this.store.getSandbox(sandboxId);
    return sb && !TERMINAL_STATUSES.includes(sb.status) ? sb : undefined;
  }

  /** For a caller with an API key of the sandbox's team (raw TCP tunnels): no exposure needed. */
  async authorizeTeam(teamId: string, sandboxId: string, port: number): Promise<PortTarget> {
    return this.target(await this.sandboxes.get(teamId, sandboxId), port);
  }

  private target(sb: Sandbox, port: number): PortTarget {
    if (sb.status !== "RUNNING") {
      throw new SandtreeError("SANDBOX_NOT_RUNNING", `sandbox ${sb.id} is ${sb.status}, not RUNNING`, {
        id: sb.id,
        status: sb.status,
      });
    }
    return { sandbox: sb, port };
  }

  /** A connection to the target's port, through its sandbox's machine; failures as `failure` says. */
  async open(target: PortTarget, opts: { signal?: AbortSignal } = {}): Promise<Duplex> {
    try {
      return await this.guests.connect(target.sandbox, target.port, opts);
    } catch (err) {
      throw portFailure(err, target);
    }
  }
}

/**
 * Why a connection to a guest's port failed, as the caller is told: 502 GUEST_ERROR, "nothing
 * listens" when the guest refused; a SandtreeError (not running, no network) as it is.
 */
export function portFailure(err: unknown, target: PortTarget): SandtreeError {
  if (err instanceof SandtreeError) return err;
  const where = { id: target.sandbox.id, port: target.port };
  if (err instanceof MachinePortError && err.refused) {
    return new SandtreeError(
      "GUEST_ERROR",
      `nothing listens on port ${target.port} in sandbox ${target.sandbox.id} (connection refused)`,
      where,
    );
  }
  const e = err as NodeJS.ErrnoException;
  const why = err instanceof MachinePortError ? err.reason : (e.code ?? e.message);
  return new SandtreeError("GUEST_ERROR", `could not reach port ${target.port} of sandbox ${target.sandbox.id}: ${why}`, where);
}

function info(row: ExposedPortRow): ExposedPortInfo {
  return { sandbox_id: row.sandbox_id, port: row.port, created_at: row.created_at };
}

function refuseEnded(sb: Sandbox): void {
  if (TERMINAL_STATUSES.includes(sb.status)) {
    throw new SandtreeError("SANDBOX_NOT_RUNNING", `sandbox ${sb.id} is ${sb.status}: it has no ports`, {
      id: sb.id,
      status: sb.status,
    });
  }
}

function portNotFound(id: string, port: number): SandtreeError {
  return new SandtreeError("PORT_NOT_FOUND", `port ${port} of sandbox ${id} is not exposed`, { id, port });
}

function networkDisabled(id: string): SandtreeError {
  return new SandtreeError("NETWORK_DISABLED", `sandbox ${id} has no network: it was created with network: false`, { id });
}
