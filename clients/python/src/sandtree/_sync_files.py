"""Files: streamed uploads and downloads, reads of a whole file or a window (SandboxClient's part)."""
# GENERATED from _async_files.py by scripts/unasync.py: edit _async_files.py and run it again.

from __future__ import annotations

import os
import uuid
from datetime import datetime, timezone
from typing import Any, Iterator, Dict, Optional

import httpx

from . import _calls as c
from . import _prime_args as pa
from ._sync_base import Base
from .errors import APITimeoutError, DownloadTimeoutError, UploadTimeoutError
from .models import FileUploadResponse, ReadFileResponse

CHUNK = 1 << 20


def _file_chunks(path: str) -> Iterator[bytes]:
    # Local reads of 1 MiB are short; the network side is what is waited on.
    with open(path, "rb") as f:
        while True:
            chunk = f.read(CHUNK)
            if not chunk:
                return
            yield chunk


def _upload_kw(remote_path: str, size: int, timeout: Optional[float]) -> Dict[str, Any]:
    return {
        "params": {"path": remote_path},
        "headers": {"content-type": "application/octet-stream", "content-length": str(size)},
        "timeout": pa.positive("timeout", timeout),
    }


def _uploaded(d: Any) -> FileUploadResponse:
    return FileUploadResponse(d["path"], int(d["bytes"]), timestamp=datetime.now(timezone.utc))


def _too_slow(cls: Any, sandbox_id: str, path: str, timeout: Optional[float], e: Exception) -> Exception:
    what = "upload to" if cls is UploadTimeoutError else "download of"
    return cls(f"{what} {path!r} in sandbox {sandbox_id} took longer than {timeout} s: {e}", code="TIMEOUT")


class Files(Base):
    def upload_file(
        self, sandbox_id: str, file_path: str, local_file_path: str, timeout: Optional[float] = None
    ) -> FileUploadResponse:
        """Streams a local file to `file_path` in the sandbox (any size; parents are created).

        `timeout`: seconds each read or write may wait (none by default); UploadTimeoutError past it.
        """
        size = os.stat(local_file_path).st_size
        try:
            d = self.client.json(
                "PUT", c.files_path(sandbox_id), content=lambda: _file_chunks(local_file_path),
                **_upload_kw(file_path, size, timeout),
            )
        except APITimeoutError as e:
            raise _too_slow(UploadTimeoutError, sandbox_id, file_path, timeout, e) from e
        return _uploaded(d)

    def upload_bytes(
        self,
        sandbox_id: str,
        file_path: str,
        file_bytes: bytes,
        filename: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> FileUploadResponse:
        """Writes `file_bytes` to `file_path` (prime_sandboxes' `filename` names the multipart part it
        sends; sandtree sends the bytes as they are, so it has no use)."""
        try:
            d = self.client.json(
                "PUT", c.files_path(sandbox_id), content=bytes(file_bytes), **_upload_kw(file_path, len(file_bytes), timeout)
            )
        except APITimeoutError as e:
            raise _too_slow(UploadTimeoutError, sandbox_id, file_path, timeout, e) from e
        return _uploaded(d)

    def download_file(
        self, sandbox_id: str, file_path: str, local_file_path: str, timeout: Optional[float] = None
    ) -> int:
        """Streams a file of the sandbox to `local_file_path` (written whole or not at all); the byte count.

        `timeout`: seconds each read may wait (none by default); DownloadTimeoutError past it.
        """
        partial = f"{local_file_path}.{uuid.uuid4().hex[:8]}.partial"
        written = 0
        try:
            with self.client.stream(
                "GET", c.files_path(sandbox_id), params={"path": file_path}, timeout=pa.positive("timeout", timeout),
                headers={"accept": "application/octet-stream"},
            ) as r:
                with open(partial, "xb") as out:
                    for chunk in r.iter_bytes(CHUNK):
                        out.write(chunk)
                        written += len(chunk)
            os.replace(partial, local_file_path)
        except (APITimeoutError, httpx.TimeoutException) as e:
            raise _too_slow(DownloadTimeoutError, sandbox_id, file_path, timeout, e) from e
        finally:
            if os.path.exists(partial):
                os.unlink(partial)
        return written

    def read_file(
        self,
        sandbox_id: str,
        file_path: str,
        timeout: Optional[float] = None,
        offset: Optional[int] = None,
        length: Optional[int] = None,
        *,
        encoding: Optional[str] = "utf-8",
    ) -> ReadFileResponse:
        """A file, or `length` bytes of it from `offset` (negative: from the end, a tail).

        `content` is text in `encoding`, or bytes with encoding=None; `total_size` the file's size.
        """
        if length is not None and length < 0:
            raise ValueError("length must be zero or more")
        kw: Dict[str, Any] = {"headers": {"accept": "application/octet-stream"}}
        if timeout is not None:
            kw["timeout"] = pa.positive("timeout", timeout)
        total: Optional[int] = None
        start = 0
        if offset is not None or length is not None:
            st = self._run(c.file_stat(sandbox_id, file_path))
            total = int(st["size"])
            start = max(0, total + offset) if offset is not None and offset < 0 else offset or 0
        params: Dict[str, Any] = {"path": file_path}
        if start:
            params["offset"] = start
        if length is not None:
            params["length"] = length
        r = self.client.send("GET", c.files_path(sandbox_id), params=params, **kw)
        data = r.content
        total = len(data) if total is None else total
        content = data if encoding is None else data.decode(encoding)
        return ReadFileResponse(content, len(data), total_size=total, offset=start, truncated=start + len(data) < total)
