// The browser the dashboard's tests drive: Debian's chromium through playwright-core.
import { execFileSync } from "node:child_process";
import { type Browser, chromium, type Page } from "playwright-core";

/** Launches chromium (found on PATH; no sandbox: the tests run as root) and opens a page of `viewport`. */
export async function openPage(viewport: { width: number; height: number }): Promise<{ browser: Browser; page: Page }> {
  const executablePath = execFileSync("sh", ["-c", "command -v chromium"], { encoding: "utf8" }).trim();
  const browser = await chromium.launch({ executablePath, args: ["--no-sandbox"] });
  return { browser, page: await browser.newPage({ viewport }) };
}
