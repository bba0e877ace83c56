// The example's task, shared by fork-patches.mjs and bench/episodes.mjs: the repository copied in,
// its slow setup, the verifier, and the eight candidate patches.
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const REPO = "/root/repo";
const BUGGY = "sum(xs) / (len(xs) + 1)";
const STATS = readFileSync(path.join(HERE, "repo/calc/stats.py"), "utf8");

/** Setup commands that write repo/ into the sandbox (files as base64, no tar needed). */
function copyRepo(dir = path.join(HERE, "repo"), rel = "") {
  return readdirSync(dir)
    .sort()
    .flatMap((name) => {
      const full = path.join(dir, name);
      const r = rel ? `${rel}/${name}` : name;
      if (name === "__pycache__") return [];
      if (statSync(full).isDirectory()) return copyRepo(full, r);
      const b64 = readFileSync(full).toString("base64");
      return [`mkdir -p $(dirname ${REPO}/${r}) && echo ${b64} | base64 -d > ${REPO}/${r}`];
    });
}

export const candidates = JSON.parse(readFileSync(path.join(HERE, "candidates.json"), "utf8"));

export const environment = {
  image: "sandtree/debian",
  setup: [...copyRepo(), `sh ${REPO}/setup.sh`],
  verifier: `cd ${REPO} && python3 score.py`,
  memoryGb: 0.5,
  env: { SETUP_EXTRA_SECONDS: process.env.SETUP_EXTRA_SECONDS ?? "4" },
};

/** The file a candidate patch writes: calc/stats.py with the buggy expression replaced. */
export function patched(patch) {
  return { path: `${REPO}/calc/stats.py`, content: STATS.replace(BUGGY, patch) };
}
