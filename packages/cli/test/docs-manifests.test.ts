// The Kubernetes manifests the docs give (every ```yaml block of docs/*.md) are read as a user's
// `kubectl apply` would take them: each parses, its workloads select their own pods, every mount
// names a volume, every secret it reads is one the docs create, and every `sandtree ...` command
// line in it names real subcommands and flags, with `$(VAR)` only of variables the container
// defines and SANDTREE_* variables only of those sandtree reads.
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { PassThrough } from "node:stream";
import type { Command } from "commander";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import type { CliContext } from "../src/context.js";
import { buildProgram } from "../src/program.js";

const ROOT = path.resolve(import.meta.dirname, "../../..");
const DOCS = path.join(ROOT, "docs");

interface Container {
  name: string;
  image: string;
  args?: string[];
  env?: Array<{ name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }>;
  envFrom?: Array<{ secretRef?: { name: string } }>;
  volumeMounts?: Array<{ name: string; mountPath: string }>;
}
interface Workload {
  kind: string;
  metadata: { name: string; namespace?: string };
  spec: {
    selector?: { matchLabels: Record<string, string> };
    template?: {
      metadata: { labels: Record<string, string> };
      spec: { containers: Container[]; volumes?: Array<{ name: string; secret?: { secretName: string } }> };
    };
  };
}

function yamlBlocks(): Array<{ file: string; text: string }> {
  const out: Array<{ file: string; text: string }> = [];
  for (const f of readdirSync(DOCS).filter((n) => n.endsWith(".md"))) {
    const md = readFileSync(path.join(DOCS, f), "utf8");
    for (const m of md.matchAll(/```ya?ml\n([\s\S]*?)```/g)) out.push({ file: f, text: m[1] ?? "" });
  }
  return out;
}

/** Every SANDTREE_* name the sources of the server and CLI mention. */
function knownVariables(): Set<string> {
  const names = new Set<string>();
  const walk = (dir: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith(".ts")) for (const m of readFileSync(p, "utf8").matchAll(/SANDTREE_[A-Z0-9_]+/g)) names.add(m[0]);
    }
  };
  for (const pkg of ["server", "cli", "host"]) walk(path.join(ROOT, "packages", pkg, "src"));
  return names;
}

function program(): Command {
  const ctx: CliContext = {
    stdout: new PassThrough(),
    stderr: new PassThrough(),
    stdin: Object.assign(new PassThrough(), { isTTY: false }),
    env: {},
    client: async () => {
      throw new Error("no client in this test");
    },
    exitCode: 0,
  };
  return buildProgram(ctx);
}

/** The subcommand an argv names and the flags it passes; throws on a name the CLI lacks. */
function commandOf(args: string[]): { cmd: Command; flags: string[]; path: string } {
  let cmd = program();
  let i = 1; // args[0] is the `sandtree` executable
  while (i < args.length && !(args[i] ?? "").startsWith("-")) {
    const next = cmd.commands.find((c) => c.name() === args[i] || c.aliases().includes(args[i] ?? ""));
    if (!next) break;
    cmd = next;
    i++;
  }
  const flags = args.slice(i).filter((a) => a.startsWith("--"));
  return { cmd, flags: flags.map((f) => f.split("=")[0] ?? f), path: args.slice(0, i).join(" ") };
}

const blocks = yamlBlocks();
const workloads: Array<{ file: string; w: Workload }> = [];
for (const b of blocks)
  for (const doc of parseAllDocuments(b.text)) {
    const w = doc.toJS() as Workload | null;
    if (w?.spec?.template) workloads.push({ file: b.file, w });
  }

describe("the Kubernetes manifests in the docs", () => {
  it("every yaml block parses, and the docs hold a control-plane Deployment and a worker DaemonSet", () => {
    expect(blocks.length).toBeGreaterThan(0);
    for (const b of blocks)
      for (const doc of parseAllDocuments(b.text)) expect(doc.errors.map((e) => `${b.file}: ${e.message}`)).toEqual([]);
    const kinds = workloads.map(({ w }) => w.kind);
    expect(kinds).toContain("Deployment");
    expect(kinds).toContain("DaemonSet");
  });

  it("workloads select their own pods; mounts name volumes; secrets read are ones the docs create", () => {
    const docsText = readdirSync(DOCS)
      .filter((n) => n.endsWith(".md"))
      .map((n) => readFileSync(path.join(DOCS, n), "utf8"))
      .join("\n");
    const created = new Set([...docsText.matchAll(/kubectl\s.*?create secret generic ([a-z0-9-]+)/g)].map((m) => m[1]));
    for (const { file, w } of workloads) {
      const where = `${file}: ${w.kind} ${w.metadata.name}`;
      const tpl = w.spec.template;
      if (!tpl) continue;
      for (const [k, v] of Object.entries(w.spec.selector?.matchLabels ?? {})) expect(tpl.metadata.labels[k], where).toBe(v);
      const volumes = new Set((tpl.spec.volumes ?? []).map((v) => v.name));
      const secrets = new Set<string>();
      for (const v of tpl.spec.volumes ?? []) if (v.secret) secrets.add(v.secret.secretName);
      for (const c of tpl.spec.containers) {
        for (const m of c.volumeMounts ?? []) expect(volumes.has(m.name), `${where}: mount ${m.name}`).toBe(true);
        for (const e of c.env ?? []) if (e.valueFrom?.secretKeyRef) secrets.add(e.valueFrom.secretKeyRef.name);
        for (const e of c.envFrom ?? []) if (e.secretRef) secrets.add(e.secretRef.name);
      }
      for (const s of secrets) expect(created.has(s), `${where}: secret ${s} is never created in the docs`).toBe(true);
    }
  });

  it("each container's sandtree command line names real subcommands, flags and variables", () => {
    const known = knownVariables();
    let commands = 0;
    for (const { file, w } of workloads)
      for (const c of w.spec.template?.spec.containers ?? []) {
        const where = `${file}: ${w.kind} ${w.metadata.name} container ${c.name}`;
        const args = (c.args ?? []).map(String);
        if (args[0] !== "sandtree") continue;
        commands++;
        const { cmd, flags, path: named } = commandOf(args);
        expect(cmd.commands.length, `${where}: "${named}" is not a command (it has subcommands)`).toBe(0);
        const longs = new Set(cmd.options.map((o) => o.long));
        for (const f of flags) expect(longs.has(f), `${where}: "${named}" has no option ${f}`).toBe(true);
        const defined = new Set((c.env ?? []).map((e) => e.name));
        for (const a of args)
          for (const m of a.matchAll(/\$\(([A-Z0-9_]+)\)/g))
            expect(defined.has(m[1] ?? ""), `${where}: $(${m[1]}) is not in its env`).toBe(true);
        for (const e of c.env ?? [])
          if (e.name.startsWith("SANDTREE_")) expect(known.has(e.name), `${where}: sandtree reads no ${e.name}`).toBe(true);
      }
    expect(commands).toBeGreaterThanOrEqual(2);
  });
});
