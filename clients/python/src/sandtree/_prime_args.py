"""prime_sandboxes' arguments mapped onto sandtree's API, or refused when sandtree cannot honour them.

A value that only has a meaning on Prime's platform (GPUs, regions, LAN networks, users within a
team) is refused with a ValueError that says so, never dropped: code that relies on it must learn
that it does not hold here.
"""

from __future__ import annotations

import math
import shlex
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

Labels = Union[Mapping[str, str], Sequence[str], None]

# prime_sandboxes' wait budgets: max_attempts counted 1 s apart for the first 5, then 2 s apart.
_FAST_POLLS = 5


def labels_dict(labels: Labels) -> Optional[Dict[str, str]]:
    """sandtree's labels are KEY=VALUE; prime_sandboxes' are strings: "k=v" is {k: v}, "k" is {k: ""}."""
    if labels is None:
        return None
    if isinstance(labels, Mapping):
        return {str(k): str(v) for k, v in labels.items()}
    if isinstance(labels, str):
        raise ValueError("labels is a list of strings (or a dict), not one string")
    out: Dict[str, str] = {}
    for label in labels:
        key, _, value = str(label).partition("=")
        out[key] = value
    return out


def creation_timeout(max_attempts: int) -> float:
    """The wall-clock budget prime_sandboxes gives `max_attempts` in wait_for_creation."""
    if not isinstance(max_attempts, int) or max_attempts < 1:
        raise ValueError("max_attempts must be a positive integer")
    if max_attempts <= _FAST_POLLS:
        return float(max_attempts)
    return float(_FAST_POLLS + (max_attempts - _FAST_POLLS) * 2)


def positive(name: str, value: Optional[float]) -> Optional[float]:
    if value is not None and (not math.isfinite(value) or value <= 0):
        raise ValueError(f"{name} must be finite and greater than zero")
    return value


def refuse(what: str, why: str) -> ValueError:
    return ValueError(f"{what} is not supported by sandtree: {why}")


def check_unset(values: Mapping[str, Any], why: Mapping[str, str]) -> None:
    """Raises for the first of `values` set to anything but None/False/0/empty."""
    for name, value in values.items():
        if value not in (None, False, 0, [], {}):
            raise refuse(f"{name}={value!r}", why[name])


def start_command(value: Any) -> Optional[str]:
    """A shell string, or prime_sandboxes' StartCommand (executable, args) joined as shell words."""
    if value is None or isinstance(value, str):
        return value
    executable = value["executable"] if isinstance(value, Mapping) else getattr(value, "executable")
    args: List[str] = list((value.get("args") if isinstance(value, Mapping) else getattr(value, "args", None)) or [])
    return shlex.join([str(executable), *map(str, args)])


def _whole(name: str, value: Optional[float], why: str) -> Optional[int]:
    """`value` as an int; refused (saying `why`) when it has a fraction."""
    if value is None:
        return None
    if float(value) != int(value):
        raise refuse(f"{name}={value}", why)
    return int(value)


def whole_cores(cpu_cores: Optional[float]) -> Optional[int]:
    return _whole("cpu_cores", cpu_cores, "a sandbox gets whole vCPUs")


WHY = {
    "gpu_count": "sandboxes have no GPUs",
    "gpu_type": "sandboxes have no GPUs",
    "region": "one server (or fleet) has no regions",
    "advanced_configs": "there are no advanced configs",
    "lan_network_id": "there are no LAN networks",
    "lan_tags": "there are no LAN networks",
    "volumes": "there are no volumes (use checkpoints to keep files)",
    "user_id": "a key belongs to a team, not to a user within it",
}


def arch(value: Optional[str]) -> None:
    if value not in (None, "amd64"):
        raise refuse(f"arch={value!r}", "sandboxes are amd64 microVMs")


def whole_gb(disk_size_gb: Optional[float]) -> Optional[int]:
    return _whole("disk_size_gb", disk_size_gb, "disks are whole GiB")
