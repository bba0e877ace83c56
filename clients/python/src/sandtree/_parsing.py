"""Parsing helpers of the models: timestamps, a dataclass read field by field, and errors for
answers that do not fit."""

from __future__ import annotations

import dataclasses
import typing
from datetime import datetime
from functools import lru_cache
from typing import Any, Callable, ClassVar, Dict, Optional, Tuple, Type, TypeVar

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


_Reader = Callable[[Dict[str, Any]], Any]


def _reader(f: dataclasses.Field, hint: Any) -> _Reader:  # type: ignore[type-arg]
    """How the answer's key `f.name` becomes the field, from its type: Optional[datetime] parsed,
    other Optional values as they are, lists and dicts copied (empty when absent or null), and a
    plain type (str, int, float, bool, an Enum) converted: required, or its default when absent."""
    name = f.name
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union and type(None) in args:
        if datetime in args:
            return lambda d: _dt(d.get(name))
        return lambda d: d.get(name)
    if origin is list:
        return lambda d: list(d.get(name) or [])
    if origin is dict:
        return lambda d: dict(d.get(name) or {})
    if f.default is dataclasses.MISSING:
        return lambda d: hint(d[name])
    default = f.default
    return lambda d: hint(d.get(name, default))


@lru_cache(maxsize=None)
def _readers(cls: type) -> Tuple[Tuple[str, _Reader], ...]:
    hints = typing.get_type_hints(cls)
    return tuple((f.name, _reader(f, hints[f.name])) for f in dataclasses.fields(cls) if f.init)


def _from_fields(cls: Any, kind: str, data: Any, **given: _Reader) -> Any:
    """The dataclass `cls` read from the answer `data` field by field (see `_reader`); `given`
    reads the fields whose key or meaning differ. A missing or unfit value: InvalidResponseError."""

    def build(d: Dict[str, Any]) -> Any:
        return cls(**{name: (given[name] if name in given else read)(d) for name, read in _readers(cls)})

    return _parse(kind, data, build)


_T = TypeVar("_T", bound="_FromAnswer")


class _FromAnswer:
    """A model read from the server's answer field by field (`_from_fields`); `_KIND` names it in
    the error an answer that does not fit raises, `_READERS` reads the fields whose key or meaning
    differ."""

    _KIND: ClassVar[str]
    _READERS: ClassVar[Dict[str, _Reader]] = {}

    @classmethod
    def from_dict(cls: Type[_T], d: Dict[str, Any]) -> _T:
        result: _T = _from_fields(cls, cls._KIND, d, **cls._READERS)
        return result
