"""Sink options declared once: their URI name, TOML key, type, default and allowed values.

A sink lists its options in one ``OptionTable``. ``resolve`` reads every option of the table
from the sink URI's query string, else from the changefeed config (``[sink]`` and its
sub-tables: the URI wins over TOML), else takes the default; it parses the value by its kind
and refuses a malformed or out-of-range value with one line that names the key, the value,
where it came from and what is allowed::

    invalid worker-count 0 in the sink URI: expected an integer greater than 0 and at most 512
    invalid sink.mysql-config.max-txn-row 5000 in the changefeed config: expected an integer ...

Nothing is clamped: a value outside the range is an error, never silently replaced. A URI
value is refused with ``SinkURIError``, a TOML value with ``ConfigError``. Unknown URI
parameters are the sink's business (``ParsedURI.reject_unknown`` after every read).

An option sparkcdc does not implement is declared with ``unsupported`` (why): any value but its
default, the one sparkcdc always behaves as, is refused by ``not_supported``, the one wording of
"not supported" for TOML keys, URI parameters and command-line values.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NoReturn

from sparkcdc.config.uri import ParsedURI, parse_duration
from sparkcdc.errors import ConfigError, SinkURIError

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

_INT = re.compile(r"^[+-]?\d+$")
_SIZE = re.compile(r"^(\d+)\s*(b|kib|mib|gib)?$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "b": 1, "kib": KIB, "mib": MIB, "gib": GIB}
_TRUE = ("true", "1")
_FALSE = ("false", "0")


def not_supported(
    subject: str, why: str = "", *, fix: str = "remove it", ticdc: bool = False, uri: bool = False
) -> ConfigError:
    """The one "not supported" refusal: ``{subject} is not supported by sparkcdc; {fix} ({why})``.

    ``subject`` names the key, parameter, flag or value (``config key 'sink.x'``, ``sink URI
    parameter 'x'``, ``--upstream-uri scheme 'ftp'``); ``ticdc``: TiCDC accepts it, so the message
    says so; ``uri``: a ``SinkURIError``.
    """
    said = "is accepted by TiCDC, not supported by sparkcdc" if ticdc else "is not supported by sparkcdc"
    text = f"{subject} {said}; {fix}" + (f" ({why})" if why else "")
    return SinkURIError(text) if uri else ConfigError(text)


def show_value(value: Any) -> str:
    """A value as TOML writes it (``true``, ``'text'``, ``16``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value)
    return str(value)


class Kind(StrEnum):
    """How an option's text is parsed."""

    INT = "int"
    BOOL = "bool"
    STR = "str"
    DURATION = "duration"
    """Go-style (``5s``, ``1m30s``, ``200ms``); the value is in seconds (float)."""
    SIZE = "size"
    """Bytes, plain (``67108864``) or with a binary unit (``64MiB``); the value is an int."""
    ENUM = "enum"
    """One of ``choices`` (strings)."""


class Source(StrEnum):
    """Where a resolved value came from."""

    URI = "sink URI"
    TOML = "changefeed config"
    DEFAULT = "default"


def format_duration(seconds: float) -> str:
    """A duration in Go's short form: ``2s``, ``10m``, ``1m30s``, ``500ms``."""
    if seconds == 0:
        return "0s"
    if seconds < 1:
        return f"{seconds * 1000:g}ms"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    out = f"{int(hours)}h" if hours else ""
    out += f"{int(minutes)}m" if minutes else ""
    return out + (f"{secs:g}s" if secs else "")


def format_size(n: int) -> str:
    """A byte count with the largest binary unit that divides it: ``1 MiB``, ``1536 KiB``."""
    for unit, factor in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if n and n % factor == 0:
            return f"{n // factor} {unit}"
    return f"{n} bytes"


def parse_size(text: str) -> int | None:
    """Bytes from ``67108864``, ``64MiB`` or ``512 KiB``; None if the text is not a size."""
    m = _SIZE.match(text.strip())
    if m is None:
        return None
    return int(m.group(1)) * _SIZE_UNITS[(m.group(2) or "").lower()]


@dataclass(frozen=True)
class Option:
    """One sink option: where it is read from, its type, default and allowed values.

    ``toml`` is the dashed key path under the section given to ``resolve`` (for the sinks,
    ``[sink]``: ``cloud-storage-config.worker-count``), or None for a URI-only option.
    Bounds: ``ge`` (at least), ``gt`` (greater than), ``le`` (at most), in the option's unit
    (seconds for a duration, bytes for a size). ``choices`` lists the allowed values of an
    enum (or of an int); with ``fold_case`` an enum matches in any case and resolves to the
    spelling in ``choices``. ``pattern`` (a regex) constrains a string, ``expect`` says in words
    what it must look like. A ``secret`` value is never shown in messages.
    """

    name: str
    kind: Kind
    default: Any = None
    toml: str | None = None
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    choices: tuple[Any, ...] = ()
    fold_case: bool = False
    pattern: str | None = None
    expect: str = ""
    secret: bool = False
    help: str = ""
    unsupported: str = ""
    """Why sparkcdc does not implement this TiCDC option: any value but ``default`` is refused."""

    def __post_init__(self) -> None:
        if self.ge is not None and self.gt is not None:
            raise ValueError(f"option {self.name!r}: give ge or gt, not both")
        if self.kind is Kind.ENUM and not self.choices:
            raise ValueError(f"option {self.name!r}: an enum needs choices")
        if self.choices and self.kind not in (Kind.ENUM, Kind.INT):
            raise ValueError(f"option {self.name!r}: only enum and int options take choices")
        if self.pattern is not None and (self.kind is not Kind.STR or not self.expect):
            raise ValueError(f"option {self.name!r}: a pattern is for str options and needs expect")
        if self.default is not None and not self.allows(self.default):
            raise ValueError(f"option {self.name!r}: default {self.default!r} is not allowed")

    def requirement(self) -> str:
        """What a valid value looks like, with its range or choices (``an integer greater than 0 ...``)."""
        if self.choices:
            return "one of: " + ", ".join(str(c) for c in self.choices)
        if self.kind is Kind.BOOL:
            return "true or false"
        if self.kind is Kind.STR:
            return self.expect or "a string"
        bounds = self._bounds()
        if self.kind is Kind.INT:
            return "an integer" + (f" {bounds}" if bounds else "")
        if self.kind is Kind.DURATION:
            return "a duration like 5s, 200ms or 1m30s" + (f", {bounds}" if bounds else "")
        return "a size in bytes like 67108864 or 64MiB" + (f", {bounds}" if bounds else "")

    def _show_bound(self, bound: float) -> str:
        if self.kind is Kind.DURATION:
            return format_duration(bound)
        if self.kind is Kind.SIZE:
            return format_size(int(bound))
        return str(int(bound)) if float(bound).is_integer() else str(bound)

    def _bounds(self) -> str:
        parts = []
        if self.gt is not None:
            parts.append(f"greater than {self._show_bound(self.gt)}")
        if self.ge is not None:
            parts.append(f"at least {self._show_bound(self.ge)}")
        if self.le is not None:
            parts.append(f"at most {self._show_bound(self.le)}")
        return " and ".join(parts)

    def allows(self, value: Any) -> bool:
        """Whether a parsed value is within the range, the choices or the pattern."""
        if self.choices:
            return value in self.choices
        if self.kind in (Kind.INT, Kind.DURATION, Kind.SIZE):
            return (
                (self.gt is None or value > self.gt)
                and (self.ge is None or value >= self.ge)
                and (self.le is None or value <= self.le)
            )
        if self.kind is Kind.STR and self.pattern is not None:
            return re.fullmatch(self.pattern, value) is not None
        return True

    def parse_text(self, text: str) -> Any:
        """The value of ``text`` (a URI parameter or a TOML string), or None if it is malformed."""
        if self.kind is Kind.INT:
            return int(text) if _INT.match(text.strip()) else None
        if self.kind is Kind.BOOL:
            low = text.strip().lower()
            return True if low in _TRUE else False if low in _FALSE else None
        if self.kind is Kind.DURATION:
            try:
                return parse_duration(text, self.name)
            except SinkURIError:
                return None
        if self.kind is Kind.SIZE:
            return parse_size(text)
        if self.kind is Kind.ENUM and self.fold_case:
            folded = text.strip().lower()
            return next((c for c in self.choices if c.lower() == folded), text)
        return text


class OptionTable:
    """A sink's options, in the order they are documented; names are unique."""

    def __init__(self, *options: Option) -> None:
        self._options: dict[str, Option] = {}
        for opt in options:
            if opt.name in self._options:
                raise ValueError(f"option {opt.name!r} is declared twice")
            self._options[opt.name] = opt

    def __iter__(self) -> Iterator[Option]:
        return iter(self._options.values())

    def __getitem__(self, name: str) -> Option:
        return self._options[name]

    def __len__(self) -> int:
        return len(self._options)

    @property
    def names(self) -> tuple[str, ...]:
        """The URI parameter names."""
        return tuple(self._options)


class Resolved(Mapping[str, Any]):
    """The resolved values by URI parameter name, and where each came from."""

    def __init__(self, values: dict[str, Any], sources: dict[str, Source]) -> None:
        self._values = values
        self._sources = sources

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def source(self, name: str) -> Source:
        """Where the value of ``name`` came from."""
        return self._sources[name]

    def __repr__(self) -> str:
        return f"Resolved({self._values!r})"


@dataclass(frozen=True)
class _Origin:
    """Where a raw value came from, as messages name it."""

    key: str
    source: Source

    def refuse(self, opt: Option, shown: str) -> NoReturn:
        cls = SinkURIError if self.source is Source.URI else ConfigError
        raise cls(f"invalid {self.key} {shown} in the {self.source}: expected {opt.requirement()}")


def _show(opt: Option, raw: Any, parsed: Any) -> str:
    if opt.secret:
        return "'xxxxx'"
    if isinstance(raw, bool):
        return str(raw).lower()
    if isinstance(raw, int | float):
        return str(raw)
    if parsed is not None and isinstance(raw, str) and _INT.match(raw.strip()):
        return raw.strip()  # an out-of-range number reads better unquoted: "worker-count 0"
    return repr(raw)


def _parse(opt: Option, raw: Any, origin: _Origin) -> Any:
    """The value of a URI string or a TOML value, refused if malformed or out of range."""
    if isinstance(raw, str):
        value = opt.parse_text(raw)
    elif opt.kind is Kind.BOOL and isinstance(raw, bool):
        value = raw
    elif opt.kind in (Kind.INT, Kind.SIZE) and isinstance(raw, int) and not isinstance(raw, bool):
        value = raw
    else:
        value = None
    if value is None or not opt.allows(value):
        origin.refuse(opt, _show(opt, raw, value))
    if opt.unsupported and value != opt.default:
        subject = (
            f"sink URI parameter {origin.key!r}"
            if origin.source is Source.URI
            else f"config key {origin.key!r}"
        )
        raise not_supported(
            subject,
            f"sparkcdc always behaves as {show_value(opt.default)}: {opt.unsupported}",
            ticdc=True,
            uri=origin.source is Source.URI,
        )
    return value


def _toml_value(section: object, path: str) -> Any:
    obj: Any = section
    for part in path.split("."):
        obj = getattr(obj, part.replace("-", "_"))
        if obj is None:
            return None
    return obj


def _uri_value(uri: ParsedURI | Mapping[str, str] | None, name: str) -> str | None:
    if uri is None:
        return None
    if isinstance(uri, ParsedURI):
        return uri.get(name)  # also marks the parameter as read, for reject_unknown
    return uri.get(name)


def resolve(
    table: OptionTable | Iterable[Option],
    uri: ParsedURI | Mapping[str, str] | None,
    section: object | None,
    *,
    where: str = "sink",
) -> Resolved:
    """Every option of ``table``: from the URI query, else from ``section`` (TOML), else the default.

    ``section`` is the config object the options' ``toml`` paths start from and ``where`` its
    key path in the changefeed config (``sink`` for ``ReplicaConfig.sink``), so that a refused
    TOML value is named by its full key (``sink.cloud-storage-config.worker-count``). In TOML,
    an unset key is None; an empty string counts as unset too except for str options (the
    config's dataclasses use ``""`` as the default of some enums).
    """
    values: dict[str, Any] = {}
    sources: dict[str, Source] = {}
    for opt in table:
        raw = _uri_value(uri, opt.name)
        if raw is not None:
            values[opt.name] = _parse(opt, raw, _Origin(opt.name, Source.URI))
            sources[opt.name] = Source.URI
            continue
        conf = _toml_value(section, opt.toml) if section is not None and opt.toml else None
        if conf is not None and not (conf == "" and opt.kind is not Kind.STR):
            key = f"{where}.{opt.toml}" if where else str(opt.toml)
            values[opt.name] = _parse(opt, conf, _Origin(key, Source.TOML))
            sources[opt.name] = Source.TOML
            continue
        values[opt.name] = opt.default
        sources[opt.name] = Source.DEFAULT
    return Resolved(values, sources)
