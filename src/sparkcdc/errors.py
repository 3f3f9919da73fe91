"""Errors: a small hierarchy with stable codes, transient vs permanent in the class.

Every error carries a stable ``code`` (TiCDC-style ``CDC:Err...``) and says in
its message what was wrong and how to fix it. ``HTTP_STATUS`` maps classes to
API status codes in one table.
"""

from __future__ import annotations


class SparkCdcError(Exception):
    """Base of every sparkcdc error."""

    code = "CDC:ErrUnknown"
    transient = False

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        """The human-readable message."""
        return str(self.args[0]) if self.args else ""

    def to_dict(self) -> dict[str, str]:
        """The error as the API shows it."""
        return {"error_code": self.code, "error_msg": self.message}


class PermanentError(SparkCdcError):
    """Retrying will not help: the changefeed goes to ``failed``."""


class TransientError(SparkCdcError):
    """A passing fault: retried with backoff, shown as a warning."""

    transient = True


class ConfigError(PermanentError):
    """A bad option, URI or config key; refused before anything starts."""

    code = "CDC:ErrInvalidConfig"


class SinkURIError(ConfigError):
    """A sink URI that cannot be used."""

    code = "CDC:ErrSinkURIInvalid"


class FilterRuleError(ConfigError):
    """A table-filter rule that does not parse."""

    code = "CDC:ErrFilterRuleInvalid"


class UpstreamSetupError(PermanentError):
    """The upstream database is not set up for CDC (binlog off, wrong format, privileges)."""

    code = "CDC:ErrUpstreamSetup"


class UpstreamUnavailable(TransientError):
    """The upstream database cannot be reached right now."""

    code = "CDC:ErrUpstreamUnavailable"


class BinlogPurgedError(PermanentError):
    """The start position is no longer in the upstream binlog."""

    code = "CDC:ErrBinlogPurged"


class SchemaError(PermanentError):
    """Schema history and the binlog disagree, or a DDL cannot be applied."""

    code = "CDC:ErrSchemaMismatch"


class DecodeError(PermanentError):
    """A binlog event or a sink record that cannot be decoded."""

    code = "CDC:ErrDecode"


class SinkError(PermanentError):
    """The sink refused the data for good (4xx, bad credentials, incompatible schema)."""

    code = "CDC:ErrSinkFailed"


class SinkUnavailable(TransientError):
    """The sink cannot be reached right now."""

    code = "CDC:ErrSinkUnavailable"


class StateStorageError(PermanentError):
    """The changefeed's data dir (``--data-dir``) cannot be used: missing, not writable, bad credentials."""

    code = "CDC:ErrStateStorage"


class StateStorageUnavailable(TransientError):
    """The changefeed's data dir cannot be reached right now (object store down, timeout)."""

    code = "CDC:ErrStateStorageUnavailable"


class MessageTooLargeError(SinkError):
    """An encoded message is larger than max-message-bytes."""

    code = "CDC:ErrMessageTooLarge"


class ChangefeedNotFound(SparkCdcError):
    """No changefeed with that id."""

    code = "CDC:ErrChangeFeedNotExists"


class ChangefeedExists(SparkCdcError):
    """A changefeed with that id (or subscriber name) already exists."""

    code = "CDC:ErrChangeFeedAlreadyExists"


class ChangefeedStateError(SparkCdcError):
    """The verb is not allowed in the changefeed's current state."""

    code = "CDC:ErrChangefeedUpdateRefused"


class ConflictError(TransientError):
    """A compare-and-swap lost: someone else moved the row first."""

    code = "CDC:ErrMetaConflict"


class AuthError(SparkCdcError):
    """Missing or wrong API credentials."""

    code = "CDC:ErrUnauthorized"


HTTP_STATUS: dict[type[SparkCdcError], int] = {
    ConfigError: 400,
    ChangefeedNotFound: 404,
    ChangefeedExists: 409,
    ChangefeedStateError: 409,
    ConflictError: 409,
    AuthError: 401,
    UpstreamSetupError: 400,
    UpstreamUnavailable: 503,
    SinkUnavailable: 503,
    StateStorageUnavailable: 503,
}


def http_status(err: BaseException) -> int:
    """The HTTP status for an error (the most specific class in HTTP_STATUS wins)."""
    for cls in type(err).__mro__:
        if cls in HTTP_STATUS:
            return HTTP_STATUS[cls]
    return 500
