// The guest wire constants are written three times: proto.h (the agent and the fuzzer),
// packages/protocol's guest-frames.ts (the host) and tools/agentctl.py (the debug client).
// proto.h is the source; this test fails when another copy disagrees with it.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import {
  Flag,
  FRAME_HEADER_BYTES,
  FRAME_MAGIC,
  FRAME_MAX_PAYLOAD,
  FrameType,
  STREAM_WINDOW_BYTES,
  Tag,
} from "@sandtree/protocol";
import { describe, expect, it } from "vitest";

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));
const header = readFileSync(here("../src/proto.h"), "utf8").replace(/\/\*[\s\S]*?\*\//g, "");

/** `#define NAME value` with the value evaluated (only integer literals, `u`, shifts, products). */
function defines(): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of header.matchAll(/^#define[ \t]+(\w+)[ \t]+(.+)$/gm)) {
    const expr = (m[2] ?? "").replace(/(\d|[xX][0-9a-fA-F]+)u\b/g, "$1").trim();
    if (!/^[\d\sxXa-fA-F()<*+]+$/.test(expr)) continue;
    out[m[1] ?? ""] = Function(`"use strict"; return (${expr});`)() as number;
  }
  return out;
}

/** Members of `enum NAME { A = 1, ... }` with the prefix stripped. */
function enumMembers(name: string, prefix: RegExp): Record<string, number> {
  const body = new RegExp(`enum\\s+${name}\\s*\\{([^}]*)\\}`).exec(header)?.[1];
  if (!body) throw new Error(`enum ${name} not found in proto.h`);
  const out: Record<string, number> = {};
  for (const m of body.matchAll(/(\w+)\s*=\s*(0[xX][0-9a-fA-F]+|\d+)/g)) {
    out[(m[1] ?? "").replace(prefix, "")] = Number(m[2]);
  }
  return out;
}

describe("guest wire constants agree with proto.h", () => {
  const d = defines();

  it("framing: magic, header size, payload limit, stream window", () => {
    expect(FRAME_MAGIC).toBe(((d.FRAME_MAGIC1 ?? 0) << 8) | (d.FRAME_MAGIC0 ?? 0));
    expect(FRAME_HEADER_BYTES).toBe(d.FRAME_HDR);
    expect(FRAME_MAX_PAYLOAD).toBe(d.FRAME_MAX);
    expect(STREAM_WINDOW_BYTES).toBe(d.INITIAL_CREDIT);
  });

  it("frame types and TLV tags in guest-frames.ts are exactly proto.h's", () => {
    expect({ ...FrameType }).toEqual(enumMembers("frame_type", /^T_/));
    expect({ ...Tag }).toEqual(enumMembers("tlv_tag", /^TAG_/));
  });

  it("flags in guest-frames.ts are proto.h's", () => {
    const names: Record<keyof typeof Flag, string> = {
      APPEND: "FLAG_APPEND",
      RECURSIVE: "FLAG_PARENTS",
      STDIN_OPEN: "FLAG_STDIN",
      PTY: "FLAG_PTY",
    };
    const fromHeader = Object.fromEntries(Object.entries(names).map(([k, c]) => [k, d[c]]));
    expect({ ...Flag }).toEqual(fromHeader);
    expect(
      Object.keys(d)
        .filter((k) => k.startsWith("FLAG_"))
        .sort(),
    ).toEqual(Object.values(names).sort());
  });

  it("every constant agentctl.py names has proto.h's value", () => {
    const script = [
      "import importlib.util, json, sys",
      "spec = importlib.util.spec_from_file_location('agentctl', sys.argv[1])",
      "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)",
      "print(json.dumps({k: v for k, v in vars(m).items() if k.isupper() and isinstance(v, int)}))",
    ].join("\n");
    const py = JSON.parse(execFileSync("python3", ["-c", script, here("../tools/agentctl.py")], { encoding: "utf8" })) as Record<
      string,
      number
    >;
    const known: Record<string, number> = {
      ...enumMembers("frame_type", /^T_/),
      ...enumMembers("tlv_tag", /^TAG_/),
      MAGIC: FRAME_MAGIC,
      CREDIT: d.INITIAL_CREDIT ?? -1,
    };
    expect(Object.keys(py).length).toBeGreaterThan(30);
    for (const [name, value] of Object.entries(py)) {
      expect(known[name], `agentctl.py ${name}`).toBe(value);
    }
  });
});
