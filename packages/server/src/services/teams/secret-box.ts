import { createCipheriv, createDecipheriv, createHmac, randomBytes } from "node:crypto";
import { chmodSync, closeSync, openSync, readFileSync, statSync, writeSync } from "node:fs";
import path from "node:path";

const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const VERSION = "v1";

/**
 * The server's key for data at rest: `<dataDir>/server.key`, 32 random bytes, 0600, created on
 * first start. Created with O_EXCL so two processes starting at once agree on one key.
 */
export function loadOrCreateServerKey(dataDir: string): Buffer {
  const file = path.join(dataDir, "server.key");
  try {
    const fd = openSync(file, "wx", 0o600);
    try {
      writeSync(fd, randomBytes(KEY_BYTES));
    } finally {
      closeSync(fd);
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
  }
  // A key mounted read-only (a Kubernetes Secret with mode 0400 or 0600) is left as it is.
  if ((statSync(file).mode & 0o077) !== 0) chmodSync(file, 0o600);
  const key = readFileSync(file);
  if (key.length !== KEY_BYTES) throw new Error(`${file} must hold exactly ${KEY_BYTES} bytes (it has ${key.length})`);
  return key;
}

/** AES-256-GCM sealing of small JSON values, bound to a context string (e.g. the sandbox id). */
export class SecretBox {
  private readonly encKey: Buffer;
  private readonly macKey: Buffer;

  constructor(serverKey: Buffer) {
    // Separate subkeys, so the MAC of request bodies never reuses the encryption key.
    this.encKey = createHmac("sha256", serverKey).update("sandtree secrets v1").digest();
    this.macKey = createHmac("sha256", serverKey).update("sandtree request mac v1").digest();
  }

  seal(value: unknown, context: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv("aes-256-gcm", this.encKey, iv);
    cipher.setAAD(Buffer.from(context));
    const ct = Buffer.concat([cipher.update(JSON.stringify(value), "utf8"), cipher.final()]);
    return `${VERSION}:${Buffer.concat([iv, cipher.getAuthTag(), ct]).toString("base64")}`;
  }

  open<T>(sealed: string, context: string): T {
    const [version, b64] = sealed.split(":", 2);
    if (version !== VERSION || b64 === undefined) throw new Error(`unknown sealed format ${version}`);
    const raw = Buffer.from(b64, "base64");
    const decipher = createDecipheriv("aes-256-gcm", this.encKey, raw.subarray(0, IV_BYTES));
    decipher.setAAD(Buffer.from(context));
    decipher.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
    const pt = Buffer.concat([decipher.update(raw.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]);
    return JSON.parse(pt.toString("utf8")) as T;
  }

  /** A keyed digest (so a stored digest reveals nothing guessable about secret values). */
  mac(text: string): string {
    return createHmac("sha256", this.macKey).update(text).digest("hex");
  }
}

/** `{NAME: "***"}`: what every API answer shows of secrets. */
export function maskSecrets(secrets: Record<string, string> | undefined): Record<string, string> {
  return Object.fromEntries(Object.keys(secrets ?? {}).map((k) => [k, "***"]));
}
