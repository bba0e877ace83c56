// The pieces every part of the OpenAPI document is written with (openapi-schemas.ts and the parts
// it merges: each checks the schema names it uses against its own).

/** `ref`, `json` and `ok` for the schema names `Name`. */
export function schemaRefs<Name extends string>() {
  const ref = (name: Name) => ({ $ref: `#/components/schemas/${name}` });
  const json = (name: Name) => ({ content: { "application/json": { schema: ref(name) } } });
  const ok = (name: Name) => ({ description: name, ...json(name) });
  return { ref, json, ok };
}

export const bytes = { description: "bytes", content: { "application/octet-stream": {} } };
export const none = (description: string) => ({ description });
export const query = (...names: string[]) => names.map((n) => ({ name: n, in: "query", schema: { type: "string" } }));
export const outputQuery = query("stream", "offset", "length");
export const pathQuery = { name: "path", in: "query", required: true, schema: { type: "string" } };
