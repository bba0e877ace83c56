import { DisplaySize, type Sandbox } from "@sandtree/protocol";

/** The image config labels through which an image says what it needs (sandtree's own images set them). */
export const IMAGE_LABELS = {
  /** A shell command run at start, as a create's `start_command` (e.g. `start-dockerd`). */
  startCommand: "sandtree.start-command",
  /** The display a desktop image brings up, `WIDTHxHEIGHT` (e.g. `1280x800`), as a create's `display`. */
  display: "sandtree.display",
} as const;

/**
 * What an image's labels give a sandbox whose create did not say otherwise: its start command and
 * its display. A label that is malformed is ignored with a reason (the caller logs it); an image
 * that declares nothing changes nothing (the idle default).
 */
export function imageDefaults(
  sb: Pick<Sandbox, "start_command" | "display">,
  labels: Readonly<Record<string, string>> | undefined,
): { patch: Partial<Pick<Sandbox, "start_command" | "display">>; ignored: string[] } {
  const patch: Partial<Pick<Sandbox, "start_command" | "display">> = {};
  const ignored: string[] = [];
  const start = labels?.[IMAGE_LABELS.startCommand]?.trim();
  if (!sb.start_command && start) patch.start_command = start;
  const display = labels?.[IMAGE_LABELS.display];
  if (!sb.display && display !== undefined) {
    const size = parseDisplay(display);
    if (size) patch.display = `${size.width}x${size.height}`;
    else ignored.push(`label ${IMAGE_LABELS.display}=${JSON.stringify(display)} is not a display size like 1280x800`);
  }
  return { patch, ignored };
}

/** `1280x800` as a display size within the API's limits, or null. */
export function parseDisplay(text: string): { width: number; height: number } | null {
  const m = /^(\d{3,4})x(\d{3,4})$/.exec(text.trim());
  if (!m) return null;
  const parsed = DisplaySize.safeParse({ width: Number(m[1]), height: Number(m[2]) });
  return parsed.success ? { width: parsed.data.width, height: parsed.data.height } : null;
}
