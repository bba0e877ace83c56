import { DesktopEvent } from "@sandtree/protocol";
import { expect } from "vitest";
import type { TestServer } from "./helpers.js";

/**
 * What the desktop tests (desktop.test.ts, desktop-live.test.ts) do through one test server's
 * API: create a sandbox (remembered in `sandboxes`, which `deleteAll` deletes at the end) and run
 * a desktop action, each asserting the call succeeded. `server` answers the file's server once
 * its beforeAll started it.
 */
export function desktopCalls(server: () => TestServer | undefined) {
  const sandboxes: string[] = [];
  const api = (): TestServer["api"] => {
    const t = server();
    if (!t) throw new Error("the test server is not started");
    return t.api;
  };
  return {
    sandboxes,
    async create(body: object): Promise<string> {
      const r = await api()("POST", "/v1/sandboxes", body);
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      sandboxes.push(r.body.id);
      return r.body.id as string;
    },
    async act(id: string, action: object): Promise<DesktopEvent> {
      const r = await api()("POST", `/v1/sandboxes/${id}/desktop/actions`, action);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      return DesktopEvent.parse(r.body);
    },
    /** Deletes every sandbox created (or pushed onto `sandboxes`); nothing when no server started. */
    async deleteAll(): Promise<void> {
      const t = server();
      for (const id of sandboxes) await t?.api("DELETE", `/v1/sandboxes/${id}`);
    },
  };
}
