"""The volume API's calls once (see _calls.py): the sync and async clients send the same ones."""

from __future__ import annotations

from typing import Any, Dict, List, Optional
from urllib.parse import quote

from ._calls import Call
from .resource_models import VolumeInfo


def volume_path(ref: str) -> str:
    return f"/v1/volumes/{quote(ref, safe='')}"


def volume_files_path(ref: str) -> str:
    return f"{volume_path(ref)}/files"


def create_volume(name: str, size_gb: Optional[int], labels: Optional[Dict[str, str]]) -> Call:
    body: Dict[str, Any] = {"name": name}
    if size_gb is not None:
        body["size_gb"] = size_gb
    if labels:
        body["labels"] = labels
    return Call("POST", "/v1/volumes", {"json": body}, VolumeInfo.from_dict)


def list_volumes() -> Call:
    return Call("GET", "/v1/volumes", {}, lambda d: [VolumeInfo.from_dict(v) for v in d["volumes"]])


def get_volume(ref: str) -> Call:
    return Call("GET", volume_path(ref), {}, VolumeInfo.from_dict)


def delete_volume(ref: str) -> Call:
    return Call("DELETE", volume_path(ref), {}, lambda d: None)


def list_volume_files(ref: str, path: str) -> Call:
    return Call("GET", f"{volume_files_path(ref)}/list", {"params": {"path": path}}, lambda d: list(d["entries"]))


def mkdir_volume(ref: str, path: str) -> Call:
    return Call("POST", f"{volume_files_path(ref)}/mkdir", {"json": {"path": path}}, lambda d: d)


def delete_volume_file(ref: str, path: str, recursive: bool) -> Call:
    params: Dict[str, Any] = {"path": path}
    if recursive:
        params["recursive"] = "true"
    return Call("DELETE", volume_files_path(ref), {"params": params}, lambda d: None)


def write_volume_file(ref: str, path: str, data: bytes) -> Call:
    kw = {"params": {"path": path}, "content": data, "headers": {"content-type": "application/octet-stream"}}
    return Call("PUT", volume_files_path(ref), kw, lambda d: int(d["bytes"]))


def entry_names(entries: List[Dict[str, Any]]) -> List[str]:
    return [str(e.get("name", "")) for e in entries]
