// The volume file server's pieces that need no VM and no NFS-Ganesha: its config, the guest's
// mount options, and the rpcbind stub Ganesha registers with.
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ganeshaConfig } from "../src/volumes/ganesha-config.js";
import { guestAddressOf, mountHelperArgv, nfsOptions, VOLUME_SERVER_ADDRESS } from "../src/volumes/guest-mount.js";
import { RpcbindStub } from "../src/volumes/rpcbind-stub.js";

const dir = mkdtempSync(path.join(tmpdir(), "stvolcfg-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("volume file server config", () => {
  it("exports each directory to its granted addresses only, NFSv3 over TCP, and leaves out an export nobody may mount", () => {
    const text = ganeshaConfig({
      nfsPort: 2049,
      mountPort: 20048,
      exports: [
        { id: 1, hostDir: "/data/volumes/a/data", pseudo: "/v1", readWrite: ["10.0.0.2", "10.0.0.6"], readOnly: ["10.0.0.10"] },
        { id: 2, hostDir: "/data/volumes/b/data", pseudo: "/v2", readWrite: [], readOnly: [] },
      ],
    });
    expect(text).toContain("Protocols = 3;");
    expect(text).toContain("Enable_UDP = false;");
    expect(text).toContain("Enable_NLM = false;");
    expect(text).toContain("NFS_Port = 2049;");
    expect(text).toContain("MNT_Port = 20048;");
    expect(text).toContain('Path = "/data/volumes/a/data";');
    expect(text).toContain("Clients = 10.0.0.2, 10.0.0.6; Protocols = 3; Access_Type = RW;");
    expect(text).toContain("Clients = 10.0.0.10; Protocols = 3; Access_Type = RO;");
    expect(text).toContain("Access_Type = None;");
    expect(text).toContain("Squash = No_Root_Squash;");
    expect(text).not.toContain("/data/volumes/b/data");
  });

  it("refuses a directory name that would break out of the config's quoting", () => {
    const exports = [{ id: 1, hostDir: '/x";EXPORT{', pseudo: "/v1", readWrite: ["10.0.0.2"], readOnly: [] }];
    expect(() => ganeshaConfig({ nfsPort: 1, mountPort: 2, exports })).toThrow(RangeError);
  });

  it("mounts with the kernel's own options at the fixed server address, through the agent's helper", () => {
    const opts = nfsOptions({ nfs: 41000, mount: 41001 });
    expect(opts.split(",")).toEqual(
      expect.arrayContaining([
        "vers=3",
        "proto=tcp",
        "port=41000",
        "mountport=41001",
        "nolock",
        "hard",
        `addr=${VOLUME_SERVER_ADDRESS}`,
      ]),
    );
    const m = { source: `${VOLUME_SERVER_ADDRESS}:/v1`, target: "/mnt/x", type: "nfs" as const, options: opts, readOnly: true };
    expect(mountHelperArgv(m)).toEqual(["/proc/1/exe", "mount", m.source, "/mnt/x", "nfs", opts, "ro"]);
    expect(guestAddressOf("10.201.0.6/30 10.201.0.5")).toBe("10.201.0.6");
    expect(() => guestAddressOf("-")).toThrow(RangeError);
  });

  it("answers rpcbind calls with an accepted TRUE, record by record", async () => {
    const sock = path.join(dir, "rpcbind.sock");
    const stub = await RpcbindStub.listen(sock);
    try {
      // Two calls (xid 7 and 8, RPCBPROC_SET) in one write; the answers come back in order.
      const call = (xid: number) => {
        const body = Buffer.alloc(40);
        body.writeUInt32BE(xid, 0);
        body.writeUInt32BE(0, 4); // CALL
        body.writeUInt32BE(2, 8); // RPC version
        body.writeUInt32BE(100000, 12); // rpcbind
        body.writeUInt32BE(4, 16);
        body.writeUInt32BE(1, 20); // SET
        const mark = Buffer.alloc(4);
        mark.writeUInt32BE(0x80000000 + body.length, 0);
        return Buffer.concat([mark, body]);
      };
      const reply = await new Promise<Buffer>((resolve, reject) => {
        const c = net.connect(sock);
        let got = Buffer.alloc(0);
        c.on("data", (d: Buffer) => {
          got = Buffer.concat([got, d]);
          if (got.length >= 64) {
            c.destroy();
            resolve(got);
          }
        });
        c.on("error", reject);
        c.write(Buffer.concat([call(7), call(8)]));
      });
      const words = (off: number) => Array.from({ length: 8 }, (_, i) => reply.readUInt32BE(off + i * 4));
      expect(words(0)).toEqual([0x80000000 + 28, 7, 1, 0, 0, 0, 0, 1]);
      expect(words(32)).toEqual([0x80000000 + 28, 8, 1, 0, 0, 0, 0, 1]);
    } finally {
      await stub.close();
    }
  });
});
