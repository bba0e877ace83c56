// Bundles the dashboard into dist/ (index.html, app.js, app.css): everything the server serves
// at /, with no CDN. Run by `npm run build` at the root.
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const here = path.dirname(fileURLToPath(import.meta.url));
const out = path.join(here, "dist");
mkdirSync(out, { recursive: true });
await build({
  entryPoints: [path.join(here, "src", "main.ts")],
  bundle: true,
  minify: true,
  format: "esm",
  target: "es2022",
  outfile: path.join(out, "app.js"),
  logLevel: "warning",
});
const require = createRequire(import.meta.url);
const uplotCss = readFileSync(require.resolve("uplot/dist/uPlot.min.css"), "utf8");
writeFileSync(path.join(out, "app.css"), `${uplotCss}\n${readFileSync(path.join(here, "src", "style.css"), "utf8")}`);
copyFileSync(path.join(here, "src", "index.html"), path.join(out, "index.html"));
