"""RL rollout helpers on top of SandboxClient: environments saved once and forked per episode,
episode runners that pace creation and always clean up, best-of-N, tree search, trajectories
(JSONL) and replay. The same concepts as the TypeScript package @sandtree/rl."""

from .environment import Environment, SetupError
from .episode import Action, Episode
from .pacing import Pacer
from .replay import ReplayResult, replay
from .runner import LABEL, EpisodeResult, EpisodeRunner
from .search import BestOfN, Branch, Node, SearchTree, best_of_n, tree_search
from .trajectory import Event, Trajectory, digest

__all__ = [
    "LABEL",
    "Action",
    "BestOfN",
    "Branch",
    "Environment",
    "Episode",
    "EpisodeResult",
    "EpisodeRunner",
    "Event",
    "Node",
    "Pacer",
    "ReplayResult",
    "SearchTree",
    "SetupError",
    "Trajectory",
    "best_of_n",
    "digest",
    "replay",
    "tree_search",
]
