// What the volume VM tests put in a volume for a guest that has python3 but neither git nor pip
// (sandtree/debian): the host's git binary (Debian 12 on both sides: the same libc), a bundle of
// a small repository made on the host, a pip wheel (Python's bundled one), and a tiny wheel
// built with zipfile. Nothing comes from a network.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

export interface GuestTools {
  git: Buffer;
  bundle: Buffer;
  pip: Buffer;
  wheel: { name: string; bytes: Buffer };
}

function which(cmd: string): string {
  return execFileSync("sh", ["-c", `command -v ${cmd}`], { encoding: "utf8" }).trim();
}

/** The newest pip wheel a python3 here bundles (ensurepip's, or Debian's python-wheels). */
function pipWheel(): string {
  const code = [
    "import glob, os",
    "ds = ['/usr/share/python-wheels']",
    "try:\n import ensurepip\n ds.insert(0, os.path.join(os.path.dirname(ensurepip.__file__), '_bundled'))\nexcept Exception:\n pass",
    "ws = sorted(w for d in ds for w in glob.glob(os.path.join(d, 'pip-*.whl')))",
    "print(ws[-1] if ws else '')",
  ].join("\n");
  const found = execFileSync("python3", ["-c", code], { encoding: "utf8" }).trim();
  if (!found) throw new Error("no pip wheel on this host (ensurepip or python-wheels)");
  return found;
}

/**
 * The pip wheel as a zip that also holds each module compiled (`.pyc` beside its `.py`,
 * unchecked-hash: valid whatever the files' times), so a guest under TCG imports pip without
 * compiling it (zipimport caches nothing): pip runs as `python3 pip.zip/pip`.
 */
function compiledPip(dir: string): string {
  const tree = path.join(dir, "pip");
  const out = path.join(dir, "pip.zip");
  const code = `
import compileall, os, sys, zipfile
whl, tree, out = sys.argv[1:4]
zipfile.ZipFile(whl).extractall(tree)
compileall.compile_dir(tree, quiet=1, legacy=True, invalidation_mode=compileall.py_compile.PycInvalidationMode.UNCHECKED_HASH)
with zipfile.ZipFile(out, "w") as z:
    for root, _, files in os.walk(tree):
        for f in files:
            full = os.path.join(root, f)
            z.write(full, os.path.relpath(full, tree))
`;
  execFileSync("python3", ["-c", code, pipWheel(), tree, out]);
  return out;
}

/** A wheel `tinypkg` 0.1 whose module says ANSWER = 42 (RECORD hashes as pip checks them). */
function tinyWheel(dir: string): string {
  const out = path.join(dir, "tinypkg-0.1-py3-none-any.whl");
  const code = String.raw`
import base64, hashlib, sys, zipfile
files = {"tinypkg/__init__.py": b"ANSWER = 42\n",
 "tinypkg-0.1.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tinypkg\nVersion: 0.1\n",
 "tinypkg-0.1.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: sandtree-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
h = lambda b: base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b"=").decode()
rec = "".join("%s,sha256=%s,%d\n" % (n, h(b), len(b)) for n, b in files.items()) + "tinypkg-0.1.dist-info/RECORD,,\n"
with zipfile.ZipFile(sys.argv[1], "w") as z:
    for n, b in files.items(): z.writestr(n, b)
    z.writestr("tinypkg-0.1.dist-info/RECORD", rec)
`;
  execFileSync("python3", ["-c", code, out]);
  return out;
}

/** A repository of two commits (README, then a second line), as a bundle of all its refs. */
function repoBundle(dir: string): string {
  const repo = path.join(dir, "repo");
  const git = (...args: string[]) =>
    execFileSync("git", ["-c", "user.email=t@example.com", "-c", "user.name=t", "-C", repo, ...args], { stdio: "pipe" });
  execFileSync("git", ["init", "-q", "-b", "main", repo]);
  writeFileSync(path.join(repo, "README"), "one\n");
  git("add", "README");
  git("commit", "-qm", "one");
  writeFileSync(path.join(repo, "README"), "one\ntwo\n");
  git("commit", "-qam", "two");
  const out = path.join(dir, "repo.bundle");
  git("bundle", "create", "-q", out, "--all");
  return out;
}

export function guestTools(): GuestTools {
  const dir = mkdtempSync(path.join(tmpdir(), "sandtree-voltools-"));
  try {
    const wheel = tinyWheel(dir);
    return {
      git: readFileSync(which("git")),
      bundle: readFileSync(repoBundle(dir)),
      pip: readFileSync(compiledPip(dir)),
      wheel: { name: path.basename(wheel), bytes: readFileSync(wheel) },
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
