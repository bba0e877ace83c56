// The Python `e2b` SDK (PyPI, pinned in clients/compat/requirements.txt), sync and async, runs
// its core calls against the same kind of server: create, commands.run, files, kill.
import { execFile } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { compatPython } from "../compat-python.js";
import { serverForFile } from "../helpers.js";

const SCRIPT = path.join(path.dirname(fileURLToPath(import.meta.url)), "python_sdk_calls.py");

const t = serverForFile();

describe("the Python e2b SDK on sandtree", () => {
  it("creates, runs a command, writes, reads and lists files, kills: sync and async", async () => {
    const { stdout } = await promisify(execFile)(compatPython(), [SCRIPT, "sandtree/debian"], {
      env: { ...process.env, E2B_API_URL: `${t.url}/e2b`, E2B_SANDBOX_URL: `${t.url}/e2b`, E2B_API_KEY: t.key },
      timeout: 600_000,
    });
    const out = JSON.parse(stdout);
    expect(out.sync).toMatchObject({
      stdout: "sync-out\n",
      stderr: "sync-err\n",
      exit_code: 0,
      read: "written by the sync SDK",
      list: ["sync.txt"],
      running: true,
    });
    expect(out.async).toMatchObject({
      stdout: "async-out\n",
      exit_code: 0,
      read: "written by the async SDK",
      list: ["async.txt"],
    });
    expect(out.after_kill).toBe("SandboxNotFoundException");
    const left = await t.api("GET", "/v1/sandboxes?status=RUNNING");
    expect(left.body.sandboxes).toEqual([]);
  }, 600_000);
});
