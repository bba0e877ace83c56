"""Parsing helpers of the models: timestamps, and errors for answers that do not fit."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Optional

from .errors import InvalidResponseError


def _dt(value: Any) -> Optional[datetime]:
    if value is None:
        return None
    # Python 3.9's fromisoformat does not take the "Z" suffix the server writes.
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def _parse(kind: str, data: Any, build: Any) -> Any:
    try:
        return build(data)
    except (KeyError, TypeError, ValueError) as e:
        raise InvalidResponseError(f"unexpected {kind} in the answer: {e!r}", code="INVALID_RESPONSE") from e
