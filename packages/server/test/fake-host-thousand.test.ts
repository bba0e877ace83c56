// Many sandboxes (200 here, to keep CI short; SANDTREE_FAKE_COUNT=1000 for the full thousand)
// through the real server (API, services, store, blob store) on the fake host (no VM): each is created, written to, checkpointed with memory, forked, reset to its
// checkpoint and deleted with its fork. Shows the services need nothing of a VM, and keeps the
// life cycle's bookkeeping honest at a count no VM test reaches. No timing is asserted; the wall
// time is logged.
import { describe, expect, it } from "vitest";
import { lifeCycle, onFakeHost } from "./fake-host-life.js";
import type { TestServer } from "./helpers.js";

const COUNT = Number(process.env.SANDTREE_FAKE_COUNT ?? 200);
const PARALLEL = 32;
describe("a thousand sandboxes on the fake host", () => {
  let t: TestServer;
  const host = onFakeHost({
    digestChar: "a",
    async started(server) {
      t = server;
      const r = await t.api("PUT", "/v1/teams/default/limits", {
        max_creations_per_10s: 100_000,
        max_active_sandboxes: 100_000,
      });
      expect(r.status).toBe(200);
    },
  });

  it(`creates, checkpoints, forks, resets and deletes ${COUNT} sandboxes`, { timeout: 600_000 }, async () => {
    const t0 = Date.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: PARALLEL }, async () => {
        while (next < COUNT) {
          const i = next++;
          await lifeCycle(t, `s${i}`, i);
        }
      }),
    );
    const ms = Date.now() - t0;
    console.log(JSON.stringify({ sandboxes: COUNT, forks: COUNT, wall_ms: ms, starts: host.starts }));
    // Every machine stopped, and the server counts none active.
    expect(host.machines.size).toBe(0);
    expect(host.starts).toBe(3 * COUNT);
    const list = await t.api("GET", "/v1/sandboxes?status=RUNNING");
    expect(list.status).toBe(200);
  });
});
