// The dashboard's entry: sign-in, the navigation, and a hash router (#/sandboxes/ID) so that
// nothing secret ever sits in the URL.
import { ApiError, api, storedKey, storeKey } from "./api.js";
import { errorBox, h, labelled, replace, submitForm } from "./dom.js";
import { checkpointsView } from "./views/checkpoints-view.js";
import { desktopView } from "./views/desktop-view.js";
import { overviewView } from "./views/overview-view.js";
import { sandboxView } from "./views/sandbox-view.js";
import { sandboxesView } from "./views/sandboxes-view.js";
import { usageView } from "./views/usage-view.js";
import { volumesView } from "./views/volumes-view.js";

const SECTIONS = [
  { hash: "#/", label: "Overview" },
  { hash: "#/sandboxes", label: "Sandboxes" },
  { hash: "#/checkpoints", label: "Checkpoints" },
  { hash: "#/volumes", label: "Volumes" },
  { hash: "#/usage", label: "Usage" },
];

function main(): HTMLElement {
  return document.getElementById("main") as HTMLElement;
}

function signIn(message?: string): void {
  (document.getElementById("nav") as HTMLElement).hidden = true;
  (document.getElementById("sign-out") as HTMLElement).hidden = true;
  const status = h("div", { id: "sign-in-status", "aria-live": "polite" }, message ? errorBox(message) : null);
  const input = h("input", { id: "api-key", name: "api-key", type: "password", autocomplete: "off", required: true });
  const form = submitForm(
    { class: "sign-in", "aria-labelledby": "sign-in-title" },
    async () => {
      const key = input.value.trim();
      replace(status, h("p", {}, "Checking the key…"));
      try {
        await api.check(key);
        storeKey(key);
        route();
      } catch (err) {
        replace(status, errorBox(signInError(err)));
        input.focus();
      }
    },
    h("h1", { id: "sign-in-title" }, "Sign in to sandtree"),
    ...labelled("API key", input),
    h("p", { class: "hint" }, "Kept in this browser tab only (session storage) and sent in the Authorization header."),
    h("button", { type: "submit" }, "Sign in"),
    status,
  );
  replace(main(), form);
  input.focus();
}

function signInError(err: unknown): string {
  if (err instanceof ApiError && err.status === 401) return `That key was refused (${err.code}): ${err.message}`;
  return err instanceof Error ? err.message : String(err);
}

function renderNav(current: string): void {
  const nav = document.getElementById("nav") as HTMLElement;
  nav.hidden = false;
  (document.getElementById("sign-out") as HTMLElement).hidden = false;
  replace(
    nav,
    h(
      "ul",
      {},
      ...SECTIONS.map((s) => {
        const active = s.hash === "#/" ? current === "#/" : current.startsWith(s.hash);
        return h("li", {}, h("a", { href: s.hash, "aria-current": active ? "page" : null }, s.label));
      }),
    ),
  );
}

async function route(): Promise<void> {
  if (!storedKey()) return signIn();
  const hash = location.hash || "#/";
  renderNav(hash);
  // Each navigation draws into a container of its own: a slower page that answers after the
  // next navigation writes into a detached node, never over the new page.
  const root = h("div", { class: "view" });
  replace(main(), root);
  const parts = hash.slice(2).split("/").map(decodeURIComponent);
  try {
    if (parts[0] === "sandboxes" && parts[1] && parts[2] === "desktop") await desktopView(root, parts[1]);
    else if (parts[0] === "sandboxes" && parts[1]) await sandboxView(root, parts[1]);
    else if (parts[0] === "sandboxes") await sandboxesView(root);
    else if (parts[0] === "checkpoints") await checkpointsView(root);
    else if (parts[0] === "volumes") await volumesView(root);
    else if (parts[0] === "usage") await usageView(root);
    else await overviewView(root);
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      storeKey(null);
      return signIn(signInError(err));
    }
    replace(root, errorBox(err instanceof Error ? err.message : String(err)));
  }
}

document.getElementById("sign-out")?.addEventListener("click", () => {
  storeKey(null);
  signIn();
});
window.addEventListener("hashchange", () => {
  // Screen readers and keyboard users start at the new page's content.
  main().focus();
  void route();
});
void route();
