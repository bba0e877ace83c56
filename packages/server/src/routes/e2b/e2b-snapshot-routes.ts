import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { parse } from "../../errors.js";
import type { Services } from "../../services/services.js";
import { notSupported } from "./e2b-errors.js";
import { live } from "./e2b-mapping.js";

const Params = z.object({ id: z.string().min(1).max(64) });
const SnapshotBody = z.strictObject({ name: z.string().optional() });
const SnapshotQuery = z.strictObject({
  sandboxID: z.string().max(64).optional(),
  name: z.string().optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
  nextToken: z.string().regex(/^\d+$/).optional(),
});

/** E2B snapshots are sandtree memory checkpoints: a sandbox created with one's ID resumes from it. */
export function e2bSnapshotRoutes(app: FastifyInstance, s: Services): void {
  app.post("/sandboxes/:id/snapshots", async (req, reply) => {
    const { id } = parse(Params, req.params);
    const b = parse(SnapshotBody, req.body ?? {});
    if (b.name !== undefined) throw notSupported("snapshot names (a snapshot is named by its checkpoint ID)");
    live(await s.sandboxes.get(req.principal.teamId, id));
    const c = await s.checkpoints.create(req.principal.teamId, id, { includeMemory: true });
    return reply.status(201).send({ snapshotID: c.id, names: [] });
  });

  app.get("/snapshots", async (req, reply) => {
    const q = parse(SnapshotQuery, req.query);
    if (q.name !== undefined) throw notSupported("listing snapshots by name");
    const all = (await s.checkpoints.list(req.principal.teamId, q.sandboxID)).filter((c) => c.mem_key !== null);
    const from = q.nextToken ? Number(q.nextToken) : 0;
    const page = all.slice(from, from + q.limit);
    if (from + q.limit < all.length) reply.header("x-next-token", String(from + q.limit));
    return page.map((c) => ({ snapshotID: c.id, names: [] }));
  });

  // The SDK's deleteSnapshot; templates themselves are images, managed with `sandtree image`.
  app.delete("/templates/:id", async (req, reply) => {
    const { id } = parse(Params, req.params);
    if (!id.startsWith("ck-")) throw notSupported("deleting templates (they are images: `sandtree image`)");
    await s.checkpoints.delete(req.principal.teamId, id);
    return reply.status(204).send();
  });

  // Volumes wait for sandtree's shared workspaces.
  const volumes = async () => {
    throw notSupported("volumes (not available yet)");
  };
  app.post("/volumes", volumes);
  app.get("/volumes", volumes);
  app.get("/volumes/:id", volumes);
  app.delete("/volumes/:id", volumes);
}
