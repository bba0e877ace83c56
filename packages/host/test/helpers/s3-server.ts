import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import S3rver from "s3rver";

/** s3rver's built-in account: tests pass these as the AWS credentials. */
export const S3RVER_CREDENTIALS = { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" };

/**
 * Puts S3RVER_CREDENTIALS in the standard AWS variables (where servers and workers read an object
 * store's credentials, as in production); the function returned restores what was there.
 */
export function useS3Credentials(): () => void {
  const saved = { AWS_ACCESS_KEY_ID: process.env.AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY: process.env.AWS_SECRET_ACCESS_KEY };
  process.env.AWS_ACCESS_KEY_ID = S3RVER_CREDENTIALS.accessKeyId;
  process.env.AWS_SECRET_ACCESS_KEY = S3RVER_CREDENTIALS.secretAccessKey;
  return () => {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  };
}

export interface TestS3 {
  endpoint: string;
  port: number;
  bucket: string;
  /** A plain client of the server, to look at or tamper with objects behind the store's back. */
  client: S3Client;
  /** Stops the server (files kept), e.g. to make calls fail for a while. */
  stop(): Promise<void>;
  /** Starts it again on the same port over the same files. */
  restart(): Promise<void>;
  close(): Promise<void>;
}

/**
 * A real S3-protocol server (s3rver) over a temporary directory, with one bucket, on loopback
 * (or on `address`: one that network namespaces of a test reach).
 */
export async function startS3(bucket = "sandtree-test", address = "127.0.0.1"): Promise<TestS3> {
  const directory = mkdtempSync(path.join(tmpdir(), "sandtree-s3-"));
  const make = (port: number) => new S3rver({ address, port, silent: true, directory, configureBuckets: [{ name: bucket }] });
  let server = make(0);
  const { port } = await server.run();
  let running = true;
  const endpoint = `http://${address}:${port}`;
  const client = new S3Client({
    endpoint,
    region: "us-east-1",
    forcePathStyle: true,
    credentials: S3RVER_CREDENTIALS,
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED",
  });
  return {
    endpoint,
    port,
    bucket,
    client,
    async stop() {
      if (running) await server.close();
      running = false;
    },
    async restart() {
      if (running) await server.close();
      server = make(port);
      await server.run();
      running = true;
    },
    async close() {
      client.destroy();
      if (running) await server.close();
      running = false;
      rmSync(directory, { recursive: true, force: true });
    },
  };
}

/** Overwrites an object's bytes behind the store's back, keeping its metadata (a bit rot in the bucket). */
export async function corruptObject(s3: TestS3, key: string, metadata: Record<string, string>): Promise<void> {
  await s3.client.send(
    new PutObjectCommand({ Bucket: s3.bucket, Key: key, Body: Buffer.from("not the layer you stored"), Metadata: metadata }),
  );
}

/**
 * A TCP proxy to `port` that cuts its first connection once `afterBytes` went the given way
 * (`down`: server to client, `up`: client to server): a network failure in the middle of a transfer.
 */
export async function startCuttingProxy(
  port: number,
  way: "up" | "down",
  afterBytes: number,
): Promise<{ endpoint: string; cut(): boolean; close(): void }> {
  let connections = 0;
  let cut = false;
  const proxy = net.createServer((client) => {
    const first = ++connections === 1;
    const upstream = net.connect(port, "127.0.0.1");
    let relayed = 0;
    const relay = (from: net.Socket, to: net.Socket, counted: boolean) => {
      from.on("data", (chunk: Buffer) => {
        if (counted) relayed += chunk.length;
        if (counted && relayed > afterBytes) {
          cut = true;
          client.destroy();
          upstream.destroy();
        } else to.write(chunk);
      });
      from.on("end", () => to.end());
      from.on("error", () => to.destroy());
    };
    relay(client, upstream, first && way === "up");
    relay(upstream, client, first && way === "down");
  });
  await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", r));
  return {
    endpoint: `http://127.0.0.1:${(proxy.address() as net.AddressInfo).port}`,
    cut: () => cut,
    close: () => proxy.close(),
  };
}
