import { execFile } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { compatPython } from "../compat-python.js";

const HERE = path.dirname(fileURLToPath(import.meta.url));

/**
 * Runs a Python script of this folder with the real compatibility clients, configured only by
 * PRIME_API_BASE_URL and PRIME_API_KEY (HOME is a fresh directory: no ~/.prime of the machine's),
 * and returns the JSON object its last line prints. A failing script fails with its stderr.
 */
export function runPrime(script: string, args: string[], env: { base: string; key: string }, timeoutMs = 600_000): Promise<any> {
  const home = mkdtempSync(path.join(tmpdir(), "prime-home-"));
  return new Promise((resolve, reject) => {
    execFile(
      compatPython(),
      [path.join(HERE, script), ...args],
      {
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: home, PRIME_API_BASE_URL: env.base, PRIME_API_KEY: env.key },
        timeout: timeoutMs,
        maxBuffer: 64 * 1024 * 1024,
      },
      (err, stdout, stderr) => {
        if (err) {
          reject(
            new Error(`${script} ${(args[0] ?? "").slice(0, 40)} failed (${err.code ?? err.signal}):\n${stderr.slice(-6000)}`),
          );
          return;
        }
        const last = stdout.trim().split("\n").at(-1) ?? "";
        try {
          resolve(JSON.parse(last));
        } catch {
          reject(new Error(`${script} printed no JSON: ${stdout.slice(-2000)}\n${stderr.slice(-2000)}`));
        }
      },
    );
  });
}
