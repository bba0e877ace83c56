// Prints the JSON Schema of a desktop event (DesktopEvent in packages/protocol, zod), as kept in
// docs/desktop-event.schema.json: `node scripts/desktop-schema.mjs > docs/desktop-event.schema.json`.
import { DesktopEvent } from "@sandtree/protocol";
import { z } from "zod";

/** JSON with objects and arrays that fit in 100 columns on one line: the file stays short. */
export function compact(value, indent = "") {
  const flat = JSON.stringify(value);
  if (flat.length + indent.length <= 100 || value === null || typeof value !== "object") return flat;
  const inner = `${indent}  `;
  if (Array.isArray(value)) return `[\n${value.map((v) => inner + compact(v, inner)).join(",\n")}\n${indent}]`;
  const fields = Object.entries(value).map(([k, v]) => `${inner}${JSON.stringify(k)}: ${compact(v, inner)}`);
  return `{\n${fields.join(",\n")}\n${indent}}`;
}

export function desktopEventSchema() {
  return compact(z.toJSONSchema(DesktopEvent, { io: "output", unrepresentable: "any" }));
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(desktopEventSchema());
