// `sandtree volume create|list|get|delete` as a child process against a real server (no VM).
import { describe, expect, it } from "vitest";
import { runCli, serverForFile } from "./helpers.js";

const t = serverForFile();

describe("sandtree volume", () => {
  it("creates, lists, shows and deletes volumes, in tables and as JSON; errors name their code", async () => {
    const made = await runCli(t, ["volume", "create", "work", "--size", "3", "--label", "team=ml"]);
    expect(made.code).toBe(0);
    const id = made.stdout.trim();
    expect(id).toMatch(/^vol-[0-9a-f]{16}$/);
    const json = await runCli(t, ["volume", "create", "other", "-o", "json"]);
    expect(JSON.parse(json.stdout)).toMatchObject({ name: "other", size_gb: 10, status: "READY" });
    const table = await runCli(t, ["volume", "ls"]);
    expect(table.stdout).toMatch(/^ID +NAME +STATUS +USED +SIZE +MOUNTED BY +AGE\n/);
    expect(table.stdout).toMatch(new RegExp(`${id} +work +READY +0 B +3 GiB +0 `));
    const listed = JSON.parse((await runCli(t, ["volume", "list", "-o", "json"])).stdout);
    expect(listed.volumes.map((v: { name: string }) => v.name)).toEqual(["work", "other"]);
    await t.api("PUT", `/v1/volumes/${id}/files?path=/a`, new Uint8Array(2048));
    const shown = await runCli(t, ["volume", "get", "work"]);
    expect(shown.stdout).toMatch(/used: +2(\.0)? KiB\n/);
    expect(shown.stdout).toMatch(/labels: +team=ml\n/);
    expect(JSON.parse((await runCli(t, ["volume", "get", id, "-o", "json"])).stdout).used_bytes).toBe(2048);
    const dup = await runCli(t, ["volume", "create", "work"]);
    expect(dup.code).not.toBe(0);
    expect(dup.stderr).toMatch(/ALREADY_EXISTS/);
    expect((await runCli(t, ["volume", "delete", "work"])).stdout).toBe("work\n");
    expect(JSON.parse((await runCli(t, ["volume", "rm", "other", "-o", "json"])).stdout)).toEqual({ deleted: ["other"] });
    const gone = await runCli(t, ["volume", "get", "work"]);
    expect(gone.code).not.toBe(0);
    expect(gone.stderr).toMatch(/VOLUME_NOT_FOUND/);
  });
});
