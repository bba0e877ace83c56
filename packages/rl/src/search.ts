import type { Action, Episode } from "./episode.js";
import type { EpisodeRunner } from "./runner.js";

export interface Branch {
  action: Action;
  reward: number;
  episode: Episode;
}

/**
 * Tries every action in a fork of its parent's checkpoint and scores each branch; the branches
 * stay up for `keep` and are all deleted once it settles (or any of them failed).
 */
async function expand<T>(
  runner: EpisodeRunner,
  jobs: Array<{ parent: Episode; cp: string; action: Action }>,
  keep: (branches: Branch[]) => Promise<T>,
): Promise<T> {
  const opened: Episode[] = [];
  try {
    const branches = await Promise.all(
      jobs.map(async (job) => {
        const ep = await runner.openBranch(job.parent, job.cp);
        opened.push(ep);
        await ep.act(job.action);
        return { action: job.action, reward: await ep.score(), episode: ep };
      }),
    );
    return await keep(branches);
  } finally {
    // Branches still being opened when one failed are caught by the runner's sweep at close.
    await Promise.allSettled(opened.map((ep) => runner.discard(ep)));
  }
}

export interface BestOfN {
  branches: Branch[];
  best: Branch;
}

/**
 * At a decision point: checkpoints `episode`, tries each action in its own fork, scores every
 * branch and keeps the best (its reward and trajectory; all branch sandboxes are deleted on return).
 */
export async function bestOfN(runner: EpisodeRunner, episode: Episode, actions: Action[]): Promise<BestOfN> {
  const cp = await episode.checkpoint();
  return expand(
    runner,
    actions.map((action) => ({ parent: episode, cp, action })),
    async (branches) => ({ branches, best: best(branches) }),
  );
}

function best(branches: Branch[]): Branch {
  const first = branches[0];
  if (first === undefined) throw new Error("no branches");
  return branches.reduce((a, b) => (b.reward > a.reward ? b : a), first);
}

export interface SearchNode {
  id: string;
  depth: number;
  parent: string | null;
  action: Action | null;
  reward: number | null;
  path: Action[];
  /** The node's state, once it was expanded. */
  checkpointId?: string;
}

export interface SearchTree {
  nodes: SearchNode[];
  best: SearchNode;
  level(depth: number): SearchNode[];
}

/**
 * From the set-up state: at each level every kept node is checkpointed and forked once per
 * action `expandNode(node)` gives; the `width` best children are kept for the next level.
 * Every sandbox is deleted on return (nodes keep their rewards, paths and checkpoints).
 */
export function treeSearch(
  runner: EpisodeRunner,
  expandNode: (node: SearchNode) => Action[],
  opts: { depth: number; width: number },
): Promise<SearchTree> {
  return runner.withEpisode(async (rootEp) => {
    const root: SearchNode = { id: "0", depth: 0, parent: null, action: null, reward: null, path: [] };
    const nodes = [root];
    const level = async (frontier: Array<{ node: SearchNode; ep: Episode }>, d: number): Promise<void> => {
      if (d > opts.depth || frontier.length === 0) return;
      const jobs: Array<{ parent: Episode; cp: string; action: Action; node: SearchNode }> = [];
      for (const f of frontier) {
        f.node.checkpointId = await f.ep.checkpoint();
        for (const action of expandNode(f.node)) jobs.push({ parent: f.ep, cp: f.node.checkpointId, action, node: f.node });
      }
      await expand(runner, jobs, async (branches) => {
        const children = branches.map((b, i) => {
          const job = jobs[i] as (typeof jobs)[number];
          const node: SearchNode = {
            id: `${job.node.id}.${i}`,
            depth: d,
            parent: job.node.id,
            action: b.action,
            reward: b.reward,
            path: [...job.node.path, b.action],
          };
          nodes.push(node);
          return { node, ep: b.episode };
        });
        const kept = [...children].sort((a, b) => (b.node.reward ?? 0) - (a.node.reward ?? 0)).slice(0, opts.width);
        // The kept branches stay up while the next level forks them.
        await level(kept, d + 1);
      });
    };
    await level([{ node: root, ep: rootEp }], 1);
    const scored = nodes.filter((n) => n.reward !== null);
    const top = scored.reduce<SearchNode>((a, b) => ((b.reward ?? 0) > (a.reward ?? 0) ? b : a), scored[0] ?? root);
    return { nodes, best: top, level: (depth: number) => nodes.filter((n) => n.depth === depth) };
  });
}
