"""Environment: an image, setup commands run once and saved as a checkpoint, and a verifier
whose last output line (a number) or else exit code (0: 1.0, other: 0.0) gives the reward."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Sequence

from .._calls import Command
from ..command_models import CommandResponse


@dataclass
class Environment:
    image: str
    setup: Sequence[Command] = ()
    verifier: Optional[Command] = None
    memory_gb: float = 0.25
    cpu_cores: Optional[int] = None
    # Hard lifetime of every sandbox of the environment: a killed runner's sandboxes end by then.
    timeout_minutes: float = 30.0
    working_dir: Optional[str] = None
    env: Dict[str, str] = field(default_factory=dict)
    setup_timeout: Optional[float] = None
    # A desktop environment (image sandtree/desktop): {"width": 1280, "height": 800}. Episodes then
    # act on it with Episode.desktop(), and their trajectories carry the desktop's events.
    display: Optional[Dict[str, Any]] = None

    def reward(self, result: CommandResponse) -> float:
        lines = [line for line in result.stdout.splitlines() if line.strip()]
        if lines:
            try:
                return float(lines[-1].strip())
            except ValueError:
                pass
        return 1.0 if result.exit_code == 0 else 0.0


class SetupError(RuntimeError):
    """A setup command of an Environment exited non-zero."""
