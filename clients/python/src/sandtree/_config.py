"""Where the client finds its server and key: arguments, then SANDTREE_* variables, then credentials.env."""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path
from typing import Dict, Mapping, Optional, Tuple

from ._version import __version__

DEFAULT_API_URL = "http://127.0.0.1:7070"

_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


def default_data_dir(env: Mapping[str, str]) -> Path:
    """The server's data directory, as `sandtree serve` chooses it."""
    if env.get("SANDTREE_DATA_DIR"):
        return Path(env["SANDTREE_DATA_DIR"])
    base = env.get("XDG_DATA_HOME") or os.path.join(env.get("HOME") or str(Path.home()), ".local", "share")
    return Path(base) / "sandtree"


def parse_credentials(text: str) -> Dict[str, str]:
    """`export KEY=value` / `KEY="value"` lines; comments and anything else are ignored."""
    out: Dict[str, str] = {}
    for raw in text.splitlines():
        m = _LINE.match(raw)
        if not m:
            continue
        value = m.group(2).strip()
        if len(value) >= 2 and value[0] in "\"'" and value.endswith(value[0]):
            value = value[1:-1]
        out[m.group(1)] = value
    return out


def resolve(
    api_key: Optional[str],
    base_url: Optional[str],
    env: Optional[Mapping[str, str]] = None,
    require_key: bool = True,
) -> Tuple[str, str]:
    """(base_url, api_key); the credentials file is only read when something is still unset."""
    env = os.environ if env is None else env
    url = base_url or env.get("SANDTREE_API_URL")
    key = api_key or env.get("SANDTREE_API_KEY")
    file = default_data_dir(env) / "credentials.env"
    if not url or not key:
        try:
            creds = parse_credentials(file.read_text(encoding="utf-8"))
        except OSError:
            creds = {}
        url = url or creds.get("SANDTREE_API_URL")
        key = key or creds.get("SANDTREE_API_KEY")
    if not key and require_key:
        raise ValueError(
            f"no API key: pass api_key=, set SANDTREE_API_KEY, or start a server with `sandtree serve` (it writes {file})"
        )
    return (url or DEFAULT_API_URL).rstrip("/"), key or ""


def user_agent(prefix: Optional[str] = None) -> str:
    own = f"sandtree-python/{__version__} python/{platform.python_version()}"
    return f"{prefix} {own}" if prefix else own
