// A sandbox's desktop live (#/sandboxes/ID/desktop): noVNC on the API's VNC WebSocket
// (GET /v1/sandboxes/{id}/desktop/vnc). View only unless the box is ticked, which reconnects
// with ?interactive=true. The key goes as the `bearer.<key>` subprotocol: browsers cannot set
// headers on a WebSocket, and a key never goes in a URL.
import RFB from "@novnc/novnc";
import { api, storedKey } from "../api.js";
import { errorBox, h, replace } from "../dom.js";

export async function desktopView(root: HTMLElement, id: string): Promise<void> {
  replace(root, h("h1", {}, `Desktop of ${id}`), h("p", {}, "Loading…"));
  const info = await api.desktop(id);
  const status = h("p", { id: "vnc-status", role: "status", "aria-live": "polite" }, "Connecting…");
  const screen = h("div", { id: "vnc-screen", class: "vnc-screen", "aria-label": `The display of ${id}` });
  const toggle = h("input", { id: "vnc-interactive", type: "checkbox" });
  replace(
    root,
    h("p", {}, h("a", { href: `#/sandboxes/${encodeURIComponent(id)}` }, `← Sandbox ${id}`)),
    h("h1", {}, `Desktop of ${id}`),
    h("p", {}, `${info.width}×${info.height}; each viewer gets its own VNC server in the sandbox.`),
    h("p", {}, toggle, " ", h("label", { for: "vnc-interactive" }, "Interactive (send my mouse and keyboard)")),
    status,
    screen,
  );
  let rfb: RFB | null = null;
  const connect = () => {
    rfb?.disconnect();
    replace(screen);
    const interactive = toggle.checked;
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    const url = `${proto}//${location.host}/v1/sandboxes/${encodeURIComponent(id)}/desktop/vnc${interactive ? "?interactive=true" : ""}`;
    const r = new RFB(screen, url, { shared: true, wsProtocols: ["binary", `bearer.${storedKey() ?? ""}`] });
    r.viewOnly = !interactive;
    r.focusOnClick = interactive;
    r.addEventListener("connect", () => {
      status.dataset.state = "connected";
      replace(status, interactive ? "Connected (interactive)." : "Connected (view only).");
    });
    r.addEventListener("disconnect", (ev) => {
      if (rfb !== r) return;
      const clean = (ev as CustomEvent<{ clean: boolean }>).detail?.clean;
      status.dataset.state = "disconnected";
      replace(status, clean ? "Disconnected." : errorBox("The connection failed or was lost (is the sandbox still running?)."));
    });
    rfb = r;
  };
  toggle.addEventListener("change", connect);
  // Leaving the page closes the stream (its VNC server in the sandbox ends with it).
  window.addEventListener(
    "hashchange",
    () => {
      const r = rfb;
      rfb = null;
      r?.disconnect();
    },
    { once: true },
  );
  connect();
}
