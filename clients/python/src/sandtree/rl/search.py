"""best_of_n (fork N branches at a decision point, one action each, keep the best) and
tree_search (expand the best nodes level by level, checkpointing inside branches)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional, Sequence, Tuple

from .episode import Action, Episode
from .runner import EpisodeRunner


@dataclass
class Branch:
    action: Action
    reward: float
    episode: Episode


@dataclass
class BestOfN:
    branches: List[Branch]
    best: Branch


def _try(runner: EpisodeRunner, stack: ExitStack, parent: Episode, cp: str, action: Action) -> Branch:
    ep = stack.enter_context(runner.branch(parent, cp))
    ep.act(action)
    return Branch(action, ep.score(), ep)


def _expand(runner: EpisodeRunner, stack: ExitStack, jobs: Sequence[Tuple[Episode, str, Action]]) -> List[Branch]:
    with ThreadPoolExecutor(max_workers=max(1, min(runner.concurrency, len(jobs)))) as pool:
        return list(pool.map(lambda j: _try(runner, stack, *j), jobs))


def best_of_n(runner: EpisodeRunner, episode: Episode, actions: Sequence[Action]) -> BestOfN:
    """Checkpoints `episode`, tries each action in its own fork, scores every branch; all branch
    sandboxes are deleted on return (the best one's trajectory and reward stay in the result)."""
    cp = episode.checkpoint()
    with ExitStack() as stack:
        branches = _expand(runner, stack, [(episode, cp, a) for a in actions])
    return BestOfN(branches, max(branches, key=lambda b: b.reward))


@dataclass
class Node:
    id: str
    depth: int
    parent: Optional[str]
    action: Optional[Action]
    reward: Optional[float]
    path: List[Action] = field(default_factory=list)
    checkpoint_id: Optional[str] = None  # the node's state, when it was expanded
    episode: Optional[Episode] = field(default=None, repr=False)


@dataclass
class SearchTree:
    nodes: List[Node]
    best: Node

    def level(self, depth: int) -> List[Node]:
        return [n for n in self.nodes if n.depth == depth]


def tree_search(
    runner: EpisodeRunner,
    expand: Callable[[Node], Sequence[Action]],
    depth: int,
    width: int,
) -> SearchTree:
    """From the set-up state: at each level, every kept node is checkpointed and forked once per
    action `expand(node)` gives; the `width` best children are kept for the next level. Every
    sandbox is deleted on return (nodes keep their rewards, trajectories and checkpoints)."""
    with ExitStack() as stack:
        root_ep = stack.enter_context(runner.episode())
        root = Node("0", 0, None, None, None, episode=root_ep)
        nodes, frontier = [root], [root]
        for d in range(1, depth + 1):
            jobs: List[Tuple[Node, Action]] = []
            for node in frontier:
                assert node.episode is not None
                node.checkpoint_id = node.episode.checkpoint()
                jobs += [(node, a) for a in expand(node)]
            branches = _expand(runner, stack, [(n.episode, n.checkpoint_id, a) for n, a in jobs])  # type: ignore[misc]
            children = [
                Node(f"{n.id}.{i}", d, n.id, a, b.reward, [*n.path, a], episode=b.episode)
                for i, ((n, a), b) in enumerate(zip(jobs, branches))
            ]
            nodes += children
            if not children:
                break
            frontier = sorted(children, key=lambda c: c.reward or 0.0, reverse=True)[:width]
        scored = [n for n in nodes if n.reward is not None]
        best = max(scored, key=lambda n: n.reward or 0.0) if scored else root
    return SearchTree(nodes, best)
