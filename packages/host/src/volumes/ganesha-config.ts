/** One exported host directory and the guest addresses that may mount it. */
export interface ExportEntry {
  /** 1..65535, stable while the export lives. */
  id: number;
  hostDir: string;
  /** What guests mount (`/v<id>`): the host's paths stay out of the guests. */
  pseudo: string;
  /** Guest addresses allowed to mount it read-write / read-only. */
  readWrite: string[];
  readOnly: string[];
}

export interface GaneshaConfigInput {
  nfsPort: number;
  mountPort: number;
  exports: ExportEntry[];
}

function quoted(s: string): string {
  if (/["\n\\]/.test(s)) throw new RangeError(`unsupported character in ${JSON.stringify(s)}`);
  return `"${s}"`;
}

/**
 * NFS-Ganesha's configuration: NFSv3 over TCP only (stateless: a memory fork's children share
 * their parent's client state without confusing the server), no lock manager, no rquota, no
 * UDP (no portmapper registration beyond the stub's), listening on the two given ports on every
 * address (nftables lets sandboxes reach them on their gateway only). Root is not squashed: the
 * guest's uids and gids are stored as they are, so owners and permissions of the guest's users
 * hold. An export with no allowed address is left out.
 */
export function ganeshaConfig(input: GaneshaConfigInput): string {
  const lines = [
    "NFS_CORE_PARAM {",
    "  Protocols = 3;",
    `  NFS_Port = ${input.nfsPort};`,
    `  MNT_Port = ${input.mountPort};`,
    "  Enable_NLM = false;",
    "  Enable_RQUOTA = false;",
    "  Enable_UDP = false;",
    "  mount_path_pseudo = true;",
    "}",
    "NFSV4 { Graceless = true; }",
    "NFS_KRB5 { Active_krb5 = false; }",
    // No directory chunks cached: the file API writes the same directories from the host.
    "MDCACHE { Dir_Chunk = 0; }",
  ];
  for (const e of input.exports) {
    if (e.readWrite.length === 0 && e.readOnly.length === 0) continue;
    lines.push(
      "EXPORT {",
      `  Export_Id = ${e.id};`,
      `  Path = ${quoted(e.hostDir)};`,
      `  Pseudo = ${quoted(e.pseudo)};`,
      "  Protocols = 3;",
      "  Transports = TCP;",
      "  Access_Type = None;",
      "  Squash = No_Root_Squash;",
      "  SecType = sys;",
      // Attributes straight from the file system (the file API writes beside the server).
      "  Attr_Expiration_Time = 0;",
      "  FSAL { Name = VFS; }",
    );
    if (e.readWrite.length) lines.push(`  CLIENT { Clients = ${e.readWrite.join(", ")}; Protocols = 3; Access_Type = RW; }`);
    if (e.readOnly.length) lines.push(`  CLIENT { Clients = ${e.readOnly.join(", ")}; Protocols = 3; Access_Type = RO; }`);
    lines.push("}");
  }
  return `${lines.join("\n")}\n`;
}
