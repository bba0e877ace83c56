"""Writes the synchronous twin of each async part of the client (src/sandtree/_async_*.py ->
_sync_*.py), as httpcore's scripts/unasync.py does: each method is written once, awaited.

    python3 scripts/unasync.py          # (re)write the _sync_*.py files
    python3 scripts/unasync.py --check  # exit 1, naming the stale files, when one differs

tests/test_unasync.py runs --check, so a change to an async part without its twin fails.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "sandtree"

# Whole words, in order; each pattern is a regular expression.
SUBS = [
    (r"^import asyncio\n", ""),
    (r"\basyncio\.sleep\b", "time.sleep"),
    (r"\basync def\b", "def"),
    (r"\basync with\b", "with"),
    (r"\basync for\b", "for"),
    (r"\bawait ", ""),
    (r"\b_async_(\w+)", r"_sync_\1"),
    (r"\bAsyncAPIClient\b", "APIClient"),
    (r"\bAsyncSandboxClient\b", "SandboxClient"),
    (r"\bAsync([A-Z]\w*)", r"\1"),
    (r"\basynccontextmanager\b", "contextmanager"),
    (r"\baiter_bytes\b", "iter_bytes"),
    (r"\baread\b", "read"),
    (r"\baclose\b", "close"),
    (r"\b__aenter__\b", "__enter__"),
    # prime_sandboxes' shapes: __aexit__(exc_type, exc_val, exc_tb), __exit__(*exc).
    (r"\b__aexit__\(self, exc_type: Any, exc_val: Any, exc_tb: Any\)", "__exit__(self, *exc: Any)"),
    (r"\b__aexit__\b", "__exit__"),
]

HEADER = "# GENERATED from {src} by scripts/unasync.py: edit {src} and run it again.\n"


def unasync(text: str) -> str:
    for pattern, repl in SUBS:
        text = re.sub(pattern, repl, text, flags=re.MULTILINE)
    return text


def with_header(text: str, src: str) -> str:
    """The header after the module's docstring (which stays its docstring)."""
    end = text.index('"""', 3) + 4 if text.startswith('"""') else 0
    return text[:end] + HEADER.format(src=src) + text[end:]


def twins() -> list[tuple[Path, Path]]:
    return [(p, p.with_name(p.name.replace("_async_", "_sync_", 1))) for p in sorted(SRC.glob("_async_*.py"))]


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for src, dst in twins():
        want = with_header(unasync(src.read_text(encoding="utf-8")), src.name)
        have = dst.read_text(encoding="utf-8") if dst.exists() else None
        if have == want:
            continue
        stale.append(dst.name)
        if not check:
            dst.write_text(want, encoding="utf-8")
    if check and stale:
        print(f"stale: {', '.join(stale)}: run python3 clients/python/scripts/unasync.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
