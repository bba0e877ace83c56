import { expect, it } from "vitest";
import { openImageAliases } from "../../src/store/open-store.js";
import type { StoreContext } from "./fixtures.js";

/** The admin-set image alias table, shared by every server on the database. */
export function imageAliasCases(ctx: StoreContext): void {
  it("sets, replaces, lists in name order and deletes image aliases, and keeps them across a restart", async () => {
    const aliases = openImageAliases(ctx.store);
    expect(await aliases.listImageAliases()).toEqual([]);
    expect(await aliases.getImageAlias("python:3.11-slim")).toBeUndefined();
    const first = await aliases.setImageAlias("python:3.11-slim", "sandtree/debian:latest");
    expect(first).toMatchObject({ name: "python:3.11-slim", target: "sandtree/debian:latest" });
    expect(first.created_at).toBe(first.updated_at);
    await aliases.setImageAlias("base:latest", "sandtree/busybox:latest");
    await new Promise((r) => setTimeout(r, 5));
    const replaced = await aliases.setImageAlias("python:3.11-slim", "sandtree/busybox:latest");
    expect(replaced.target).toBe("sandtree/busybox:latest");
    expect(replaced.created_at).toBe(first.created_at);
    expect(replaced.updated_at > first.updated_at).toBe(true);
    expect((await aliases.listImageAliases()).map((a) => [a.name, a.target])).toEqual([
      ["base:latest", "sandtree/busybox:latest"],
      ["python:3.11-slim", "sandtree/busybox:latest"],
    ]);
    const reopened = openImageAliases(await ctx.opened.reopen());
    expect(await reopened.getImageAlias("base:latest")).toMatchObject({ target: "sandtree/busybox:latest" });
    expect(await reopened.deleteImageAlias("base:latest")).toBe(true);
    expect(await reopened.deleteImageAlias("base:latest")).toBe(false);
    expect((await reopened.listImageAliases()).map((a) => a.name)).toEqual(["python:3.11-slim"]);
  });
}
