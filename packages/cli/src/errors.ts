import type { CommanderError } from "commander";

/** Wrong invocation: printed as `error: USAGE: ...`, exit status 2. */
export class UsageError extends Error {
  readonly code = "USAGE";
}

export const EXIT_ERROR = 1;
export const EXIT_USAGE = 2;

/** Renders any thrown value as `error: <code>: <message>` and picks the exit status. */
export function describeError(err: unknown): { line: string; exitCode: number } {
  if (err instanceof UsageError) return { line: `error: USAGE: ${err.message}`, exitCode: EXIT_USAGE };
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    const label = typeof code === "string" && code !== "" ? code : err.name === "AbortError" ? "ABORTED" : "UNEXPECTED";
    // Node's system errors already start with their code ("ENOENT: no such file ...").
    const message = err.message.startsWith(`${label}: `) ? err.message.slice(label.length + 2) : err.message;
    return { line: `error: ${label}: ${message}`, exitCode: EXIT_ERROR };
  }
  return { line: `error: UNEXPECTED: ${String(err)}`, exitCode: EXIT_ERROR };
}

/** Exit status for commander's own exits (help, version, parse errors). */
export function commanderExitCode(err: CommanderError): number {
  if (err.code === "commander.helpDisplayed" || err.code === "commander.version") return 0;
  return EXIT_USAGE;
}
