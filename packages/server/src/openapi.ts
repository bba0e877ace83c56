import { z } from "zod";
import { FLEET_OPERATIONS } from "./openapi-fleet.js";
import { PRIME_OPERATIONS } from "./openapi-prime.js";
import { SANDBOX_OPERATIONS } from "./openapi-sandboxes.js";
import { json, type Operation, schemas } from "./openapi-schemas.js";
import { SERVICE_OPERATIONS } from "./openapi-services.js";
import { VOLUME_OPERATIONS } from "./openapi-volumes.js";
import { VERSION } from "./version.js";

/**
 * What each route takes and answers, keyed by `METHOD /path` as fastify registers it. The
 * document's paths come from the routes the app registered (openapi.test.ts checks that every
 * one is described here), so a route cannot be served without being documented.
 */
const OPERATIONS: Record<string, Operation> = {
  ...SANDBOX_OPERATIONS,
  ...SERVICE_OPERATIONS,
  ...FLEET_OPERATIONS,
  ...PRIME_OPERATIONS,
  ...VOLUME_OPERATIONS,
};

/** A route as fastify's onRoute hook reports it. */
export interface RegisteredRoute {
  method: string | string[];
  url: string;
}

/** The methods a route answers, as upper case; `all` routes are keyed "ALL"; HEAD (added for GET) is left out. */
export function routeKeys(route: RegisteredRoute): string[] {
  const methods = Array.isArray(route.method) ? route.method : [route.method];
  if (methods.length > 4) return [`ALL ${route.url}`];
  return methods.filter((m) => m.toUpperCase() !== "HEAD").map((m) => `${m.toUpperCase()} ${route.url}`);
}

/** `/v1/sandboxes/:id/ports/:port` -> `/v1/sandboxes/{id}/ports/{port}`; a trailing `*` is `{path}`. */
function openApiPath(url: string): { path: string; params: string[] } {
  const params: string[] = [];
  const path = url
    .split("/")
    .map((seg) => {
      if (seg.startsWith(":")) {
        params.push(seg.slice(1));
        return `{${seg.slice(1)}}`;
      }
      if (seg === "*") {
        params.push("path");
        return "{path}";
      }
      return seg;
    })
    .join("/");
  return { path, params };
}

const ALL_METHODS = ["get", "put", "post", "delete", "patch", "options"];

/** The routes the app registered that OPERATIONS does not describe (openapi.test.ts wants none). */
export function undocumentedRoutes(routes: readonly RegisteredRoute[]): string[] {
  return routes.flatMap(routeKeys).filter((k) => !OPERATIONS[k]);
}

/** OpenAPI 3.1 of every registered route, with the zod schemas the server validates with. */
export function openApiDocument(routes: readonly RegisteredRoute[]): object {
  const components = Object.fromEntries(
    Object.entries(schemas).map(([k, s]) => [k, z.toJSONSchema(s as z.ZodType, { io: "input", unrepresentable: "any" })]),
  );
  const paths: Record<string, Record<string, object>> = {};
  for (const route of routes) {
    for (const key of routeKeys(route)) {
      const [method = "", url = ""] = key.split(" ");
      const op = OPERATIONS[key] ?? { summary: "(undocumented)", responses: {} };
      const { path, params } = openApiPath(url);
      const pathParams = params.map((n) => ({ name: n, in: "path", required: true, schema: { type: "string" } }));
      const operation = {
        summary: op.summary,
        parameters: [...pathParams, ...(op.parameters ?? [])],
        ...(op.body === "bytes"
          ? { requestBody: { content: { "application/octet-stream": {} } } }
          : op.body
            ? { requestBody: json(op.body) }
            : {}),
        responses: { ...op.responses, default: { description: "error", ...json("ErrorBody") } },
        ...(op.security ? { security: op.security } : {}),
      };
      paths[path] ??= {};
      for (const m of method === "ALL" ? ALL_METHODS : [method.toLowerCase()]) paths[path][m] = operation;
    }
  }
  return {
    openapi: "3.1.0",
    info: { title: "sandtree", version: VERSION },
    components: {
      schemas: components,
      securitySchemes: {
        bearer: { type: "http", scheme: "bearer" },
        portToken: { type: "apiKey", in: "header", name: "X-Sandtree-Token" },
        gatewayToken: {
          type: "http",
          scheme: "bearer",
          description: "a Prime gateway token (POST /prime/api/v1/sandbox/{id}/auth)",
        },
      },
    },
    security: [{ bearer: [] }],
    paths,
  };
}
