import { ERROR_CODES, ERROR_STATUS } from "@sandtree/protocol";
import { describe, expect, it } from "vitest";
import {
  AuthenticationError,
  apiErrorFrom,
  apiErrorFromCode,
  ConflictError,
  ERROR_CLASSES,
  ImagePullError,
  NotFoundError,
  QuotaExceededError,
  RateLimitError,
  SandboxNotRunningError,
  SandboxVmError,
  SandtreeApiError,
  ServerError,
} from "../src/errors.js";

/** The class every code of a status must at least be, whatever subclass the code picks. */
const BY_STATUS: Record<number, typeof SandtreeApiError> = {
  401: AuthenticationError,
  404: NotFoundError,
  409: ConflictError,
  429: RateLimitError,
  500: ServerError,
  502: ServerError,
  503: ServerError,
  504: ServerError,
  507: ServerError,
};

describe("the SDK maps errors by code", () => {
  it.each(ERROR_CODES)("%s maps to a typed error of its status class", (code) => {
    expect(ERROR_CLASSES[code]).toBeDefined();
    const err = apiErrorFromCode(code, "m");
    expect(err).toBeInstanceOf(ERROR_CLASSES[code]);
    expect(err).toBeInstanceOf(SandtreeApiError);
    expect(err).toMatchObject({ code, status: ERROR_STATUS[code] });
    const least = BY_STATUS[ERROR_STATUS[code]];
    if (least) expect(err).toBeInstanceOf(least);
  });

  it("the code decides, not the status: a code answered with another status keeps its class", () => {
    // A proxy in front may rewrite statuses; the body's code is what the server meant.
    expect(apiErrorFrom(500, { code: "SANDBOX_NOT_FOUND", message: "m" })).toBeInstanceOf(NotFoundError);
    expect(apiErrorFrom(409, { code: "SANDBOX_NOT_RUNNING", message: "m" })).toBeInstanceOf(SandboxNotRunningError);
    expect(apiErrorFrom(429, { code: "QUOTA_VCPUS", message: "m" })).toBeInstanceOf(QuotaExceededError);
    expect(apiErrorFrom(502, { code: "REGISTRY_UNREACHABLE", message: "m" })).toBeInstanceOf(ImagePullError);
  });

  it("a code this SDK does not know falls back on the status", () => {
    const e = apiErrorFrom(409, { code: "SOMETHING_NEW", message: "m" });
    expect(e).toBeInstanceOf(ConflictError);
    expect(e.code).toBe("SOMETHING_NEW");
    expect(apiErrorFrom(503, { code: "HTTP_503", message: "m" })).toBeInstanceOf(ServerError);
  });

  it("VM failures say what to do next", () => {
    const hung = apiErrorFromCode("VM_UNRESPONSIVE", "QMP stop did not answer in time");
    expect(hung).toBeInstanceOf(SandboxVmError);
    expect(hung.message).toMatch(/^QMP stop did not answer in time \(.*delete the sandbox/);
    expect(apiErrorFromCode("HOST_COMMAND_FAILED", "qemu-img exited with 1").message).toContain("details.command");
  });
});
