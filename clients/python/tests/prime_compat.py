"""Compares sandtree's Python client with the installed prime_sandboxes, name for name: each method
both clients have (SandboxClient, AsyncSandboxClient, APIClient, AsyncAPIClient) takes the same
parameters (names, order, kinds, defaults; sandtree's own only keyword-only after them) and returns
a model with at least prime_sandboxes' fields; each exception prime_sandboxes exports exists with
the same ancestry; each model both export has prime_sandboxes' fields.

Run with a python that has prime_sandboxes (test_prime_compat.py does): it prints every mismatch
and exits 1 when there is one, 2 when prime_sandboxes is missing.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import sys
import typing
from pathlib import Path
from typing import Any, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

try:
    import prime_sandboxes as prime
except ImportError as e:  # pragma: no cover - the failure is the point
    print(f"prime_sandboxes is not installed in {sys.executable}: {e}", file=sys.stderr)
    sys.exit(2)

import sandtree  # noqa: E402

CLIENTS = ["SandboxClient", "AsyncSandboxClient", "APIClient", "AsyncAPIClient"]

# Parameters prime_sandboxes requires and sandtree lets out (every call written for prime_sandboxes
# binds the same): each with why.
OPTIONAL_HERE = {
    ("SandboxClient", "__init__", "api_client"): "SandboxClient() finds its server (SANDTREE_API_URL, credentials.env)",
    ("SandboxClient", "list_checkpoints", "sandbox_id"): "without it: the team's checkpoints",
    ("AsyncSandboxClient", "list_checkpoints", "sandbox_id"): "without it: the team's checkpoints",
    ("SandboxClient", "upload_bytes", "filename"): "names a multipart part sandtree does not send",
    ("AsyncSandboxClient", "upload_bytes", "filename"): "names a multipart part sandtree does not send",
}


def public_methods(cls: type) -> List[str]:
    keep = {"__init__", "__enter__", "__exit__", "__aenter__", "__aexit__"}
    return sorted(n for n, v in inspect.getmembers(cls) if callable(v) and (not n.startswith("_") or n in keep))


def field_names(cls: Any) -> set:
    names = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    names |= {n for n in dir(cls) if isinstance(inspect.getattr_static(cls, n, None), property)}
    names |= set(getattr(cls, "model_fields", {}) or {})
    return names


def model_of(hint: Any) -> Optional[type]:
    """The model a return annotation names (List[M] gives M); None for plain values."""
    if typing.get_origin(hint) in (list, List):
        args = typing.get_args(hint)
        return model_of(args[0]) if args else None
    if isinstance(hint, type) and hasattr(hint, "model_fields"):
        return hint
    return None


def kind_of(fn: Any) -> str:
    if inspect.isasyncgenfunction(fn):
        return "async generator"
    return "coroutine" if inspect.iscoroutinefunction(fn) else "plain"


def compare_signature(where: str, cname: str, mname: str, theirs: Any, ours: Any, out: List[str]) -> None:
    tp = [p for p in inspect.signature(theirs).parameters.values() if p.name != "self"]
    op = [p for p in inspect.signature(ours).parameters.values() if p.name != "self"]
    for i, p in enumerate(tp):
        if i >= len(op):
            out.append(f"{where}: parameter {p.name!r} is missing")
            continue
        q = op[i]
        if q.name != p.name:
            out.append(f"{where}: parameter {i + 1} is {q.name!r}, prime_sandboxes has {p.name!r}")
            continue
        if q.kind != p.kind:
            out.append(f"{where}: {p.name!r} is {q.kind.description}, prime_sandboxes has {p.kind.description}")
        if p.default is inspect.Parameter.empty:
            if q.default is not inspect.Parameter.empty and (cname, mname, p.name) not in OPTIONAL_HERE:
                out.append(f"{where}: {p.name!r} has default {q.default!r}, prime_sandboxes requires it")
        elif q.default is inspect.Parameter.empty or q.default != p.default:
            shown = "none" if q.default is inspect.Parameter.empty else repr(q.default)
            out.append(f"{where}: {p.name!r} defaults to {shown}, prime_sandboxes to {p.default!r}")
    for q in op[len(tp) :]:
        if q.kind == inspect.Parameter.VAR_KEYWORD:
            continue
        if q.kind != inspect.Parameter.KEYWORD_ONLY or q.default is inspect.Parameter.empty:
            out.append(f"{where}: sandtree's own {q.name!r} must be keyword-only with a default")


def compare_return(where: str, theirs: Any, ours: Any, out: List[str]) -> None:
    model = model_of(typing.get_type_hints(theirs).get("return"))
    if model is None:
        return
    try:
        hint = typing.get_type_hints(ours).get("return")
    except Exception as e:  # an annotation that does not resolve is a mismatch too
        out.append(f"{where}: return annotation does not resolve: {e!r}")
        return
    if typing.get_origin(hint) in (list, List):
        hint = typing.get_args(hint)[0]
    if hint is None or not isinstance(hint, type):
        out.append(f"{where}: returns {hint!r}, prime_sandboxes returns the model {model.__name__}")
        return
    missing = sorted(set(model.model_fields) - field_names(hint))
    if missing:
        out.append(f"{where}: {hint.__name__} lacks {model.__name__}'s fields {missing}")


def compare_clients(out: List[str], notes: List[str]) -> None:
    for cname in CLIENTS:
        theirs_cls, ours_cls = getattr(prime, cname), getattr(sandtree, cname, None)
        if ours_cls is None:
            out.append(f"sandtree.{cname} is missing")
            continue
        for mname in public_methods(theirs_cls):
            theirs, ours = getattr(theirs_cls, mname), getattr(ours_cls, mname, None)
            where = f"{cname}.{mname}"
            if ours is None:
                notes.append(f"{where}: not provided by sandtree")
                continue
            if kind_of(theirs) != kind_of(ours):
                out.append(f"{where}: is a {kind_of(ours)} function, prime_sandboxes' a {kind_of(theirs)} one")
            compare_signature(where, cname, mname, theirs, ours, out)
            compare_return(where, theirs, ours, out)


def compare_exports(out: List[str]) -> None:
    for name in prime.__all__:
        theirs, ours = getattr(prime, name), getattr(sandtree, name, None)
        if isinstance(theirs, type) and issubclass(theirs, BaseException):
            if not (isinstance(ours, type) and issubclass(ours, BaseException)):
                out.append(f"exception {name}: sandtree does not export it")
                continue
            for base in theirs.__mro__[1:]:
                if base in (Exception, BaseException, object):
                    continue
                want = base if base.__module__ == "builtins" else getattr(sandtree, base.__name__, None)
                if want is None or not issubclass(ours, want):
                    out.append(f"exception {name}: not a subclass of {base.__name__} in sandtree")
        elif ours is None:
            continue
        elif isinstance(theirs, type) and issubclass(theirs, enum.Enum):
            missing = sorted(set(theirs.__members__) - set(getattr(ours, "__members__", {})))
            if missing:
                out.append(f"enum {name}: sandtree lacks {missing}")
        elif isinstance(theirs, type) and hasattr(theirs, "model_fields"):
            missing = sorted(set(theirs.model_fields) - field_names(ours))
            if missing:
                out.append(f"model {name}: sandtree's lacks the fields {missing}")


def _checker_catches_the_original_bug() -> bool:
    """The comparison must fail on sandtree's old wait_for_checkpoint(checkpoint_id, timeout=300.0)."""

    def old(self: Any, checkpoint_id: str, timeout: float = 300.0) -> Any: ...

    found: List[str] = []
    compare_signature("self-test", "SandboxClient", "wait_for_checkpoint", prime.SandboxClient.wait_for_checkpoint, old, found)
    return any("'timeout_seconds'" in f for f in found)


def main() -> int:
    out: List[str] = []
    notes: List[str] = []
    if not _checker_catches_the_original_bug():
        out.append("self-test: the comparison did not notice timeout= in place of timeout_seconds=")
    compare_clients(out, notes)
    compare_exports(out)
    print(f"prime_sandboxes {prime.__version__} ({Path(prime.__file__).parent}) against sandtree {sandtree.__version__}")
    for n in notes:
        print(f"note: {n}")
    for line in out:
        print(f"MISMATCH {line}")
    print(f"{len(out)} mismatch(es)")
    return 1 if out else 0


if __name__ == "__main__":
    sys.exit(main())
