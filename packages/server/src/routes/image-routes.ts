import { ImportImageRequest, PullImageRequest, SandtreeError } from "@sandtree/protocol";
import type { FastifyInstance } from "fastify";
import { parse } from "../errors.js";
import type { Services } from "../services/services.js";

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
    const img = await s.images.resolve(body.image, body.registry_credentials ? { credentials: body.registry_credentials } : {});
    return { ref: img.ref, digest: img.digest, source: img.source, virtual_size_bytes: img.virtualSizeBytes, created_at: null };
  });

  // Reads a directory on the server's host, so only admin keys may ask for it.
  app.post("/v1/images/import", async (req) => {
    if (!req.principal.isAdmin) throw new SandtreeError("FORBIDDEN", "importing a local OCI layout needs an admin key");
    const body = parse(ImportImageRequest, req.body);
    const img = await s.images.importLayout(body.path, body.name, body.layout_ref ? { layoutRef: body.layout_ref } : {});
    return { ref: img.ref, digest: img.digest, source: img.source, virtual_size_bytes: img.virtualSizeBytes, created_at: null };
  });
}
