// A tiny element builder: the dashboard is plain DOM, no framework.

type Child = Node | string | number | null | undefined | false;
type Attrs = Record<string, string | number | boolean | null | undefined | ((ev: Event) => void)>;

/** `h("button", { type: "button", onclick: f }, "Run")`; `on*` keys become listeners, `false`/null attributes are left out. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (v === true) el.setAttribute(k, "");
    else if (v !== false && v !== null && v !== undefined) el.setAttribute(k, String(v));
  }
  append(el, ...children);
  return el;
}

export function append(el: Node, ...children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
  }
}

/** Replaces everything inside `el`. */
export function replace(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, ...children);
}

/** An alert box (role=alert, so screen readers announce it). */
export function errorBox(message: string): HTMLElement {
  return h("p", { class: "error", role: "alert" }, message);
}

/** A form whose submit runs `onSubmit` in place of the browser's navigation. */
export function submitForm(attrs: Attrs, onSubmit: () => unknown, ...children: Child[]): HTMLFormElement {
  const form = h("form", attrs, ...children);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    void onSubmit();
  });
  return form;
}

/** A control and its label, named by the control's id. */
export function labelled(text: string, control: HTMLElement): [HTMLLabelElement, HTMLElement] {
  return [h("label", { for: control.id }, text), control];
}
