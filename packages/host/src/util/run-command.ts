import { spawn } from "node:child_process";

export class CommandError extends Error {
  constructor(
    readonly command: string[],
    readonly exitCode: number | null,
    readonly stderr: string,
  ) {
    super(`${command.join(" ")} failed (exit ${exitCode ?? "signal"}): ${stderr.trim().slice(-2000)}`);
    this.name = "CommandError";
  }
}

/** Runs argv (never a shell string) and returns stdout; failures carry argv, code and stderr. */
export function runCommand(argv: string[], opts: { signal?: AbortSignal; cwd?: string } = {}): Promise<string> {
  const [cmd, ...args] = argv;
  if (!cmd) throw new Error("empty command");
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"], cwd: opts.cwd, signal: opts.signal });
    let out = "";
    let err = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      err = (err + d).slice(-16_384);
    });
    child.on("error", (e) => reject(e.name === "AbortError" ? e : new CommandError(argv, null, e.message)));
    child.on("close", (code) => (code === 0 ? resolve(out) : reject(new CommandError(argv, code, err))));
  });
}
