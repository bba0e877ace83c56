import type { ExecCommand, ExecResult } from "@sandtree/sdk";

/** An image, setup commands run once and saved as a checkpoint, and a verifier. */
export interface Environment {
  image: string;
  setup?: ExecCommand[];
  verifier?: ExecCommand;
  memoryGb?: number;
  cpuCores?: number;
  /** Hard lifetime of every sandbox of the environment (default 30): a killed runner's sandboxes end by then. */
  timeoutMinutes?: number;
  cwd?: string;
  env?: Record<string, string>;
  setupTimeoutSeconds?: number;
}

/** The verifier's last output line when it is a number, else its exit code (0: 1, other: 0). */
export function rewardOf(result: Pick<ExecResult, "stdout" | "exit_code">): number {
  const lines = result.stdout.split("\n").filter((l) => l.trim() !== "");
  const last = lines[lines.length - 1]?.trim();
  if (last !== undefined && last !== "" && Number.isFinite(Number(last))) return Number(last);
  return result.exit_code === 0 ? 1 : 0;
}

export class SetupError extends Error {
  override readonly name = "SetupError";
}
