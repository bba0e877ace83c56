import { afterEach, beforeEach, describe } from "vitest";
import { admissionCases } from "./admission-cases.js";
import { checkpointCases } from "./checkpoint-cases.js";
import type { StoreContext, StoreFactory } from "./fixtures.js";
import { fleetCases, fleetLockCases } from "./fleet-cases.js";
import { imageAliasCases } from "./image-alias-cases.js";
import { jobAndPortCases } from "./job-port-cases.js";
import { meteringCases } from "./metering-cases.js";
import { networkCases } from "./network-cases.js";
import { sandboxCases } from "./sandbox-cases.js";
import { tenancyCases } from "./tenancy-cases.js";
import { volumeCases } from "./volume-cases.js";

export type { OpenedStore, StoreFactory } from "./fixtures.js";

/**
 * Every Store implementation must pass this suite (SQLite and PostgreSQL).
 * It uses the Store interface only and asserts what a caller sees. Every store call is
 * `await`ed (awaiting a plain value works), so an async store can run it unchanged; a call
 * expected to fail goes through `attempt`, which turns a throw and a rejection alike into a
 * rejected promise. Each test gets a fresh, empty store from `makeStore`; the fleet cases open
 * several stores on one database (several servers) with `makeStore({ peers })`.
 */
export function describeStoreConformance(name: string, makeStore: StoreFactory): void {
  describe(`Store conformance: ${name}`, () => {
    const ctx = {} as StoreContext;
    ctx.make = makeStore;
    beforeEach(async () => {
      ctx.opened = await makeStore();
      ctx.store = ctx.opened.store;
    });
    afterEach(async () => {
      await ctx.opened.destroy();
    });

    tenancyCases(ctx);
    admissionCases(ctx);
    sandboxCases(ctx);
    checkpointCases(ctx);
    networkCases(ctx);
    jobAndPortCases(ctx);
    meteringCases(ctx);
    fleetCases(ctx);
    fleetLockCases(ctx);
    imageAliasCases(ctx);
    volumeCases(ctx);
  });
}
