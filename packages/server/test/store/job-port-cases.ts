import { expect, it } from "vitest";
import { iso, jobRow, NOW, type StoreContext, twoTeamsTwoRunning } from "./fixtures.js";

/** Background jobs and exposed ports of a sandbox. */
export function jobAndPortCases(ctx: StoreContext): void {
  it("stores jobs per team and sandbox, lists the newest first and patches them", async () => {
    const s = ctx.store;
    const { team, other, sb, sb2 } = await twoTeamsTwoRunning(s);
    const jobs = [jobRow(team.id, sb.id), jobRow(team.id, sb.id, { command: "make", wrapper_pid: null }), jobRow(team.id, sb.id)];
    for (const j of jobs) await s.insertJob(j);
    await s.insertJob(jobRow(team.id, sb2.id));
    const [first, second] = jobs;
    if (!first || !second) throw new Error("unreachable");

    expect(await s.getJob(team.id, sb.id, second.id)).toEqual(second);
    expect(await s.getJob(other.id, sb.id, second.id)).toBeUndefined();
    expect(await s.getJob(team.id, sb2.id, second.id)).toBeUndefined();
    expect(await s.getJob(team.id, sb.id, "job-missing")).toBeUndefined();
    expect((await s.listJobs(team.id, sb.id, 10)).map((j) => j.id)).toEqual(jobs.map((j) => j.id).reverse());
    expect((await s.listJobs(team.id, sb.id, 2)).map((j) => j.id)).toEqual([jobs[2]?.id, second.id]);
    expect(await s.listJobs(other.id, sb.id, 10)).toEqual([]);

    await s.updateJob(first.id, { kill_requested: true });
    expect(await s.getJob(team.id, sb.id, first.id)).toEqual({ ...first, kill_requested: true });
    const ended = {
      status: "KILLED",
      exit_code: 137,
      stdout_bytes: 10,
      stderr_bytes: 3,
      stdout_tail: "0123456789",
      stderr_tail: "é\n",
      error_reason: "killed",
      ended_at: iso(NOW + 5_000),
    } as const;
    await s.updateJob(first.id, ended);
    expect(await s.getJob(team.id, sb.id, first.id)).toEqual({ ...first, ...ended, kill_requested: true });
    await s.updateJob(first.id, {});
    await s.updateJob("job-missing", { status: "EXITED" });
    expect(await s.getJob(team.id, sb.id, first.id)).toEqual({ ...first, ...ended, kill_requested: true });
    expect(await s.getJob(team.id, sb.id, second.id)).toEqual(second);
  });

  it("exposes ports with a token hash, replacing the hash but keeping when it was first exposed", async () => {
    const s = ctx.store;
    const row = { sandbox_id: "sb-a", port: 8080, token_sha256: "aa".repeat(32), created_at: iso(NOW) };
    expect(await s.getExposedPort("sb-a", 8080)).toBeUndefined();
    expect(await s.upsertExposedPort(row)).toEqual(row);
    const again = { ...row, token_sha256: "bb".repeat(32), created_at: iso(NOW + 60_000) };
    expect(await s.upsertExposedPort(again)).toEqual({ ...row, token_sha256: "bb".repeat(32) });
    expect(await s.getExposedPort("sb-a", 8080)).toEqual({ ...row, token_sha256: "bb".repeat(32) });

    await s.upsertExposedPort({ ...row, port: 3000 });
    await s.upsertExposedPort({ ...row, port: 9000 });
    await s.upsertExposedPort({ ...row, sandbox_id: "sb-b" });
    expect((await s.listExposedPorts("sb-a")).map((p) => p.port)).toEqual([3000, 8080, 9000]);
    expect(await s.listExposedPorts("sb-none")).toEqual([]);

    expect(await s.deleteExposedPort("sb-a", 3000)).toBe(true);
    expect(await s.deleteExposedPort("sb-a", 3000)).toBe(false);
    expect(await s.getExposedPort("sb-a", 3000)).toBeUndefined();
    expect(await s.deleteExposedPorts("sb-a")).toBe(2);
    expect(await s.deleteExposedPorts("sb-a")).toBe(0);
    expect(await s.listExposedPorts("sb-a")).toEqual([]);
    expect(await s.listExposedPorts("sb-b")).toHaveLength(1);
  });
}
