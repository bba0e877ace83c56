#!/usr/bin/env node
// Packs what a sandtree server needs to run inside a sandbox with nested virtualization (the KVM
// path's test and bench, see docs/architecture.md "How the KVM path is tested"): this checkout's
// built packages and production dependencies, the host's node, qemu-system-x86_64 and qemu-img with their libraries and QEMU's firmware (at their own paths: the sandbox runs
// sandtree/debian, the same Debian release), the guest kernel, initramfs and modules disk, the
// jail's launcher (sandtree-jail), and the
// image sandtree/busybox from the local store. An uncompressed tar (a TCG guest unpacks it faster).
//
// Usage: node scripts/kvm/bundle.mjs [--with-docker] OUT.tar   (after `npm run build` and setup;
// --with-docker adds sandtree/docker and the fixture its step loads: ~450 MB more)
// Inside the sandbox: tar -C / --keep-directory-symlink -xf OUT.tar; then
//   SANDTREE_CACHE_DIR=/opt/sandtree-cache node /opt/sandtree/packages/cli/dist/main.js serve ...
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const args = process.argv.slice(2);
const withDocker = args.includes("--with-docker");
const target = args.find((a) => !a.startsWith("--"));
const out = path.resolve(target ?? "");
if (!target) {
  console.error("usage: node scripts/kvm/bundle.mjs [--with-docker] OUT.tar");
  process.exit(2);
}
const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const cache =
  process.env.SANDTREE_CACHE_DIR ?? path.join(process.env.XDG_CACHE_HOME ?? path.join(homedir(), ".cache"), "sandtree");
const stage = mkdtempSync(path.join(tmpdir(), "sandtree-kvm-bundle-"));
const run = (cmd, args, opts = {}) => execFileSync(cmd, args, { encoding: "utf8", maxBuffer: 64 << 20, ...opts });

/** Copies a host file to the same path in the bundle (links followed). */
function put(file) {
  const dest = path.join(stage, file);
  mkdirSync(path.dirname(dest), { recursive: true });
  cpSync(file, dest, { dereference: true });
}

try {
  // Host programs the server runs, and what they load.
  // setfacl: the jail grants each VM's uid its backing files (sandtree/debian lacks the acl package).
  for (const bin of ["qemu-system-x86_64", "qemu-img", "node", "setfacl"]) {
    const file = run("sh", ["-c", `command -v ${bin}`]).trim();
    put(file);
    for (const lib of run("ldd", [file]).match(/\/\S+/g) ?? []) put(lib);
  }
  cpSync("/usr/share/qemu", path.join(stage, "usr/share/qemu"), { recursive: true, dereference: true });
  if (existsSync("/usr/share/seabios"))
    cpSync("/usr/share/seabios", path.join(stage, "usr/share/seabios"), { recursive: true, dereference: true });

  // The app: built packages and production dependencies (workspace links kept as links).
  const app = path.join(stage, "opt/sandtree");
  mkdirSync(path.join(app, "packages"), { recursive: true });
  cpSync(path.join(repo, "package.json"), path.join(app, "package.json"));
  for (const pkg of ["protocol", "host", "server", "cli", "sdk"]) {
    const from = path.join(repo, "packages", pkg);
    cpSync(path.join(from, "package.json"), path.join(app, "packages", pkg, "package.json"));
    cpSync(path.join(from, "dist"), path.join(app, "packages", pkg, "dist"), { recursive: true });
  }
  const deps = run("npm", ["ls", "--omit=dev", "--all", "--parseable"], { cwd: repo })
    .split("\n")
    .filter((p) => p.includes(`${path.sep}node_modules${path.sep}`))
    .map((p) => path.relative(repo, p));
  for (const rel of new Set(deps)) {
    if (rel.startsWith("node_modules/@sandtree/")) continue;
    cpSync(path.join(repo, rel), path.join(app, rel), { recursive: true });
  }
  mkdirSync(path.join(app, "node_modules/@sandtree"), { recursive: true });
  for (const pkg of ["protocol", "host", "server", "cli", "sdk"])
    run("ln", ["-s", `../../packages/${pkg}`, path.join(app, "node_modules/@sandtree", pkg)]);
  cpSync(path.join(repo, "scripts/kvm/inner-suite.mjs"), path.join(app, "inner-suite.mjs"));

  // The guest and one image.
  const c = path.join(stage, "opt/sandtree-cache");
  for (const f of ["kernel/vmlinuz", "kernel/release", "guest/initramfs.cpio.gz", "guest/modules.img"])
    cpSync(path.join(cache, f), path.join(c, f), { dereference: true });
  // The jail's launcher (static: it runs in the bundle's system as it is); a cache set up before
  // it existed has none, and the bundled server then warns and uses the unshare/sh/setpriv chain.
  if (existsSync(path.join(cache, "jail/sandtree-jail")))
    cpSync(path.join(cache, "jail/sandtree-jail"), path.join(c, "jail/sandtree-jail"), { dereference: true });
  const refs = JSON.parse(readFileSync(path.join(cache, "images/refs.json"), "utf8"));
  const names = ["sandtree/busybox:latest", ...(withDocker ? ["sandtree/docker:latest"] : [])];
  const images = refs.refs.filter((r) => names.includes(r.ref));
  if (images.length !== names.length) throw new Error(`${names.join(", ")}: not all in the image store: run setup`);
  mkdirSync(path.join(c, "images"), { recursive: true });
  writeFileSync(path.join(c, "images/refs.json"), JSON.stringify({ ...refs, refs: images }, null, 2));
  for (const image of images) {
    // An image is its digest's directory (base disk and metadata): nothing to build inside.
    const dir = path.join("images/blobs/sha256", image.digest.replace(/^sha256:/, ""));
    cpSync(path.join(cache, dir), path.join(c, dir), { recursive: true });
  }
  // What the inner suite's docker step loads (a busybox image as a docker-archive).
  if (withDocker) cpSync(path.join(cache, "fixtures/hello-docker.tar"), path.join(c, "fixtures/hello-docker.tar"));

  run("tar", ["-C", stage, "-cf", out, "."]);
  console.log(JSON.stringify({ bundle: out, bytes: Number(run("stat", ["-c", "%s", out]).trim()) }));
} finally {
  rmSync(stage, { recursive: true, force: true });
}
