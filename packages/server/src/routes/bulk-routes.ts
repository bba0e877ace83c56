import { BatchStatusRequest, BulkDeleteRequest } from "@sandtree/protocol";
import type { FastifyInstance } from "fastify";
import { parse } from "../errors.js";
import type { Services } from "../services/services.js";

export function bulkRoutes(app: FastifyInstance, s: Services): void {
  app.post("/v1/sandboxes/bulk-delete", async (req) => {
    const body = parse(BulkDeleteRequest, req.body);
    return s.bulk.delete(req.principal.teamId, body);
  });

  app.post("/v1/sandboxes/batch-status", async (req) => {
    const { ids } = parse(BatchStatusRequest, req.body);
    return s.bulk.batchStatus(req.principal.teamId, ids);
  });
}
