import { ImportImageRequest, PullImageRequest, SandtreeError, SetImageAliasRequest } from "@sandtree/protocol";
import type { FastifyInstance } from "fastify";
import { parse } from "../errors.js";
import type { Services } from "../services/services.js";
import type { ImageAliasRow } from "../store/image-aliases.js";

export function imageRoutes(app: FastifyInstance, s: Services): void {
  app.get("/v1/images", async () => {
    const images = await s.images.list();
    return {
      images: images.map((i) => ({
        ref: i.ref,
        digest: i.digest,
        source: i.source,
        virtual_size_bytes: i.virtualSizeBytes,
        created_at: i.createdAt ?? null,
      })),
    };
  });

  app.post("/v1/images/pull", async (req) => {
    const body = parse(PullImageRequest, req.body);
    const { image } = await s.aliases.resolve(body.image);
    const img = await s.images.resolve(image, body.registry_credentials ? { credentials: body.registry_credentials } : {});
    return { ref: img.ref, digest: img.digest, source: img.source, virtual_size_bytes: img.virtualSizeBytes, created_at: null };
  });

  // Reads a directory on the server's host, so only admin keys may ask for it.
  app.post("/v1/images/import", async (req) => {
    if (!req.principal.isAdmin) throw new SandtreeError("FORBIDDEN", "importing a local OCI layout needs an admin key");
    const body = parse(ImportImageRequest, req.body);
    const img = await s.images.importLayout(body.path, body.name, body.layout_ref ? { layoutRef: body.layout_ref } : {});
    return { ref: img.ref, digest: img.digest, source: img.source, virtual_size_bytes: img.virtualSizeBytes, created_at: null };
  });

  // The alias table: every key reads it; only admin keys change it (it applies to every team).
  app.get("/v1/images/aliases", async () => ({ aliases: (await s.aliases.list()).map(aliasView) }));

  app.put("/v1/images/aliases", async (req) => {
    if (!req.principal.isAdmin) throw new SandtreeError("FORBIDDEN", "setting an image alias needs an admin key");
    const body = parse(SetImageAliasRequest, req.body);
    return aliasView(await s.aliases.set(body.name, body.target));
  });

  app.delete("/v1/images/aliases/:name", async (req, reply) => {
    if (!req.principal.isAdmin) throw new SandtreeError("FORBIDDEN", "removing an image alias needs an admin key");
    await s.aliases.delete((req.params as { name: string }).name);
    return reply.code(204).send();
  });
}

function aliasView(a: ImageAliasRow) {
  return { name: a.name, target: a.target, created_at: a.created_at, updated_at: a.updated_at };
}
