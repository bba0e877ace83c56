import { createHash, randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { EXEC_STREAM_CONTENT_TYPE } from "@sandtree/protocol";
import { SandtreeClient } from "@sandtree/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./helpers.js";

// Byte-exactness of the binary exec stream (what the SDK reads) and of file transfers whose
// sizes are not multiples of any frame size, against one real VM.
let t: TestServer;
let client: SandtreeClient;
let id: string;

const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");
const BIG = 12 * 1024 * 1024 + 12_345;

beforeAll(async () => {
  t = await startTestServer();
  client = new SandtreeClient({ apiUrl: t.url, apiKey: t.key });
  const sb = await client.sandboxes.create({ image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 });
  id = sb.id;
  await client.sandboxes.waitForCreation(id, { intervalMs: 20, timeoutMs: 120_000 });
  const mk = await client.sandboxes.run(id, `head -c ${BIG} /dev/urandom > /tmp/big`);
  expect(mk.exit_code).toBe(0);
});
afterAll(async () => {
  await t?.close();
});

/** Runs `command` through the SDK's exec stream; returns each stream whole and the exit. */
async function streamed(command: string) {
  const h = await client.sandboxes.exec(id, command);
  const out: Uint8Array[] = [];
  const err: Uint8Array[] = [];
  for await (const ev of h.output()) {
    if (ev.type === "stdout") out.push(ev.data);
    else if (ev.type === "stderr") err.push(ev.data);
  }
  return { stdout: Buffer.concat(out), stderr: Buffer.concat(err), exit: await h.wait() };
}

async function guestSha(file: string): Promise<string> {
  const r = await client.sandboxes.run(id, ["sha256sum", file]);
  return r.stdout.split(" ")[0] ?? "";
}

describe("binary exec stream", () => {
  it("the server answers the binary form to the SDK's Accept", async () => {
    const res = await fetch(`${t.url}/v1/sandboxes/${id}/exec`, {
      method: "POST",
      headers: { authorization: `Bearer ${t.key}`, "content-type": "application/json", accept: EXEC_STREAM_CONTENT_TYPE },
      body: JSON.stringify({ command: "printf hi" }),
    });
    expect(res.headers.get("content-type")).toBe(EXEC_STREAM_CONTENT_TYPE);
    const wire = Buffer.from(await res.arrayBuffer());
    // started event, then stdout "hi" as a record (kind 1, length 2), then the exit event.
    expect(wire.includes(Buffer.from([1, 0, 0, 0, 2, 0x68, 0x69]))).toBe(true);
    expect(wire.subarray(-200).toString()).toContain('"type":"exit","exit_code":0');
  });

  it("carries 12 MiB of random bytes byte-exact, then the exit code that follows them", async () => {
    const r = await streamed("cat /tmp/big; echo done >&2; exit 7");
    expect(r.stdout.length).toBe(BIG);
    expect(sha(r.stdout)).toBe(await guestSha("/tmp/big"));
    expect(r.stderr.toString()).toBe("done\n");
    expect(r.exit.exit_code).toBe(7);
  });

  it("keeps each stream's order when stdout and stderr interleave", async () => {
    const r = await streamed("i=0; while [ $i -lt 3000 ]; do echo o$i; echo e$i >&2; i=$((i+1)); done");
    const lines = (p: string) => `${Array.from({ length: 3000 }, (_, i) => `${p}${i}`).join("\n")}\n`;
    expect(r.stdout.toString()).toBe(lines("o"));
    expect(r.stderr.toString()).toBe(lines("e"));
    expect(r.exit.exit_code).toBe(0);
  });

  it("carries a program writing 1-byte pieces byte-exact", async () => {
    const r = await streamed("dd if=/tmp/big bs=1 count=40000 2>/dev/null");
    expect(r.stdout.length).toBe(40_000);
    const head = await client.sandboxes.run(id, "head -c 40000 /tmp/big | sha256sum");
    expect(sha(r.stdout)).toBe(head.stdout.split(" ")[0]);
  });
});

describe("file transfer", () => {
  it("uploads and downloads a file of an odd size byte-exact", async () => {
    const size = 3 * 1024 * 1024 + 4097;
    const local = path.join(t.dataDir, "odd.bin");
    const bytes = randomBytes(size);
    writeFileSync(local, bytes);
    expect((await client.files.upload(id, local, "/tmp/odd.bin")).bytes).toBe(size);
    expect(await guestSha("/tmp/odd.bin")).toBe(sha(bytes));
    const back = path.join(t.dataDir, "odd-back.bin");
    expect((await client.files.download(id, "/tmp/big", back)).bytes).toBe(BIG);
    expect(sha(readFileSync(back))).toBe(await guestSha("/tmp/big"));
  });

  it("an upload whose writes fail mid-way is refused, and the next transfer is byte-exact", async () => {
    // Every write to /dev/full fails (ENOSPC): the guest ends the stream at the first DATA and
    // passes over the rest of what the host already sent (two frames here), staying in step.
    // (Small: the server answers before it has read a larger body, and the client then waits.)
    const local = path.join(t.dataDir, "full.bin");
    writeFileSync(local, randomBytes(64 * 1024 + 333));
    await expect(client.files.upload(id, local, "/dev/full")).rejects.toThrow(/\/dev\/full/);
    const bytes = randomBytes(1024 * 1024 + 7);
    writeFileSync(local, bytes);
    expect((await client.files.upload(id, local, "/tmp/after.bin")).bytes).toBe(bytes.length);
    expect(await guestSha("/tmp/after.bin")).toBe(sha(bytes));
  });
});
