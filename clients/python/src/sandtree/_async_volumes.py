"""Volumes: storage that outlives sandboxes, and its files without a sandbox (AsyncSandboxClient's part)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

from . import _volume_calls as vc
from ._async_base import AsyncBase
from .resource_models import VolumeInfo


class AsyncVolumes(AsyncBase):
    async def create_volume(self, name: str, size_gb: Optional[int] = None, labels: Optional[Dict[str, str]] = None) -> VolumeInfo:
        """A new volume of the team (names are unique per team); `size_gb` bounds its files (default 10)."""
        result: VolumeInfo = await self._run(vc.create_volume(name, size_gb, labels))
        return result

    async def list_volumes(self) -> List[VolumeInfo]:
        result: List[VolumeInfo] = await self._run(vc.list_volumes())
        return result

    async def get_volume(self, volume: str) -> VolumeInfo:
        """By id or name; `used_bytes` measured again."""
        result: VolumeInfo = await self._run(vc.get_volume(volume))
        return result

    async def delete_volume(self, volume: str) -> None:
        """Deletes it and its files; ConflictError (VOLUME_IN_USE) while a sandbox mounts it."""
        await self._run(vc.delete_volume(volume))

    async def write_volume_file(self, volume: str, path: str, data: Union[bytes, str]) -> int:
        """Writes a whole file in the volume (parents are created); answers the bytes written."""
        raw = data.encode("utf-8") if isinstance(data, str) else data
        result: int = await self._run(vc.write_volume_file(volume, path, raw))
        return result

    async def read_volume_file(self, volume: str, path: str) -> bytes:
        r = await self.client.send("GET", vc.volume_files_path(volume), params={"path": path}, headers={"accept": "application/octet-stream"})
        data: bytes = r.content
        return data

    async def list_volume_files(self, volume: str, path: str = "/") -> List[Dict[str, Any]]:
        """The entries of a directory of the volume (name, path, type, size, mode, mtime_ms...)."""
        result: List[Dict[str, Any]] = await self._run(vc.list_volume_files(volume, path))
        return result

    async def make_volume_dir(self, volume: str, path: str) -> Dict[str, Any]:
        result: Dict[str, Any] = await self._run(vc.mkdir_volume(volume, path))
        return result

    async def delete_volume_file(self, volume: str, path: str, recursive: bool = False) -> None:
        await self._run(vc.delete_volume_file(volume, path, recursive))
