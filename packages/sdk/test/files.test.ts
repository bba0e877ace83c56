import { mkdtemp, readdir, readFile, readlink, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { NotFoundError, SandtreeClient } from "../src/index.js";
import { type FakeServer, fakeServer, sendJson, sleep } from "./fake-server.js";

// The test's fake server (fakeServer closes it when the test ends).
let server: FakeServer | undefined;

describe("files", () => {
  it("upload streams the file as the raw body and reports progress", async () => {
    server = await fakeServer((req, res) =>
      sendJson(res, 200, { path: req.url.searchParams.get("path"), bytes: req.body.length }),
    );
    const dir = await mkdtemp(join(tmpdir(), "sdk-files-"));
    const local = join(dir, "in.bin");
    const content = Buffer.alloc(3 * 1024 * 1024 + 7, 1);
    await writeFile(local, content);
    const client = new SandtreeClient({ apiUrl: server.url, apiKey: "k" });
    let last = 0;
    const result = await client.files.upload("sb_1", local, "/work/in.bin", { mode: 0o755, onProgress: (b) => (last = b) });
    expect(result).toEqual({ path: "/work/in.bin", bytes: content.length });
    expect(last).toBe(content.length);
    const req = server.requests[0];
    expect(req?.method).toBe("PUT");
    expect(req?.url.searchParams.get("mode")).toBe("755");
    expect(req?.headers["transfer-encoding"]).toBe("chunked");
    expect(req?.body.equals(content)).toBe(true);
  });

  it("upload refused before its body was read closes the local file", async () => {
    // A server that answers at once and drops the connection, as one refusing a large upload would.
    const raw = createServer((req, res) => {
      res.writeHead(404, { "content-type": "application/json", connection: "close" });
      res.end(JSON.stringify({ code: "SANDBOX_NOT_FOUND", message: "no such sandbox" }), () => req.socket.destroy());
    });
    await new Promise<void>((r) => raw.listen(0, "127.0.0.1", r));
    const { port } = raw.address() as { port: number };
    const dir = await mkdtemp(join(tmpdir(), "sdk-files-"));
    const local = join(dir, "big.bin");
    await writeFile(local, Buffer.alloc(32 * 1024 * 1024, 3));
    const openOnIt = async () => {
      let n = 0;
      for (const fd of await readdir("/proc/self/fd")) if ((await readlink(`/proc/self/fd/${fd}`).catch(() => "")) === local) n++;
      return n;
    };
    try {
      const client = new SandtreeClient({ apiUrl: `http://127.0.0.1:${port}`, apiKey: "k" });
      await expect(client.files.upload("sb", local, "/big.bin")).rejects.toBeTruthy();
      for (let i = 0; i < 100 && (await openOnIt()) > 0; i++) await sleep(10);
      expect(await openOnIt()).toBe(0);
    } finally {
      await new Promise((r) => raw.close(r));
    }
  });

  it("download writes the file whole, and leaves nothing behind on failure", async () => {
    const content = Buffer.alloc(2 * 1024 * 1024, 2);
    server = await fakeServer(async (req, res) => {
      if (req.url.searchParams.get("path") === "/missing")
        return sendJson(res, 404, { code: "FILE_NOT_FOUND", message: "no such file" });
      res.writeHead(200, { "content-type": "application/octet-stream", "content-length": String(content.length) });
      res.write(content.subarray(0, 1000));
      await sleep(5);
      if (req.url.searchParams.get("path") === "/cut") {
        res.destroy();
        return;
      }
      res.end(content.subarray(1000));
    });
    const dir = await mkdtemp(join(tmpdir(), "sdk-files-"));
    const client = new SandtreeClient({ apiUrl: server.url, apiKey: "k" });
    const totals: Array<number | undefined> = [];
    await expect(client.files.download("sb", "/f", join(dir, "out"), { onProgress: (_b, t) => totals.push(t) })).resolves.toEqual(
      { bytes: content.length },
    );
    expect((await readFile(join(dir, "out"))).equals(content)).toBe(true);
    expect(totals.at(-1)).toBe(content.length);
    await expect(client.files.download("sb", "/missing", join(dir, "m"))).rejects.toBeInstanceOf(NotFoundError);
    await expect(client.files.download("sb", "/cut", join(dir, "c"))).rejects.toMatchObject({ code: "CONNECTION_FAILED" });
    expect(await readdir(dir)).toEqual(["out"]);
  });

  it("read returns bytes or text and passes offset/length; write sends the data", async () => {
    server = await fakeServer((req, res) => {
      if (req.method === "PUT") return sendJson(res, 200, { path: "/a", bytes: req.body.length });
      res.writeHead(200, { "content-type": "application/octet-stream" });
      res.end("héllo");
    });
    const client = new SandtreeClient({ apiUrl: server.url, apiKey: "k" });
    expect(await client.files.read("sb", "/a", { encoding: "utf8" })).toBe("héllo");
    const bytes = await client.files.read("sb", "/a", { offset: 1, length: 2 });
    expect(bytes).toBeInstanceOf(Uint8Array);
    expect(server.requests[1]?.url.search).toBe("?path=%2Fa&offset=1&length=2");
    expect(await client.files.write("sb", "/a", "xyz")).toEqual({ path: "/a", bytes: 3 });
    expect(await client.files.write("sb", "/a", new Uint8Array([1, 2]))).toEqual({ path: "/a", bytes: 2 });
  });
});
