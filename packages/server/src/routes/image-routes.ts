import { PullImageRequest } from "@sandtree/protocol";
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
}
