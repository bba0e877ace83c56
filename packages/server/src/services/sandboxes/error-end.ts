import type { SandboxErrorCode } from "@sandtree/protocol";
import type { SandboxPatch } from "../../store/rows.js";

/** The change that ends a sandbox in ERROR: why (a stable code and a sentence), and when. */
export function errorEnd(code: SandboxErrorCode, reason: string): SandboxPatch & { status: "ERROR" } {
  return { status: "ERROR", error_code: code, error_reason: reason, terminated_at: new Date().toISOString() };
}
