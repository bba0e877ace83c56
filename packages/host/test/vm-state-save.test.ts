import { getEventListeners } from "node:events";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { saveVmState } from "../src/snapshots/migration.js";
import type { QmpClient } from "../src/vmm/qmp-client.js";

// saveVmState against a QMP peer that plays QEMU's side of a save: `migrate` streams the state
// into the host's socket, `query-migrate` reports it completed once the stream is closed.

const dir = mkdtempSync(path.join(tmpdir(), "sandtree-save-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function qemuLike(state: Buffer): QmpClient {
  let sent: Promise<void> = Promise.resolve();
  return {
    async execute(command: string, args?: { uri?: string }) {
      if (command === "migrate") {
        const socket = String(args?.uri).replace(/^unix:/, "");
        sent = new Promise<void>((resolve, reject) => {
          const c = connect(socket, () => c.end(state));
          c.once("close", () => resolve());
          c.once("error", reject);
        });
      }
      if (command === "query-migrate") {
        await sent;
        return { status: "completed" };
      }
      return {};
    },
  } as unknown as QmpClient;
}

describe("saving a VM's state", () => {
  it("writes the whole stream to the file, and leaves no listener on a long-lived signal", async () => {
    const lifetime = new AbortController();
    const state = Buffer.alloc(256 * 1024, 7);
    for (let i = 0; i < 12; i++) {
      const file = path.join(dir, `state-${i}`);
      await saveVmState(qemuLike(state), file, { ignoreShared: true, socketDir: dir, signal: lifetime.signal });
      expect(readFileSync(file).equals(state)).toBe(true);
    }
    // A template store or memory images pass their own lifetime's signal to every save.
    expect(getEventListeners(lifetime.signal, "abort")).toHaveLength(0);
  });
});
