"""Errors: a small hierarchy with stable codes, transient vs permanent in the class.

Every error carries a stable ``code`` (TiCDC-style ``CDC:Err...``) and says in
its message what was wrong and how to fix it. ``HTTP_STATUS`` maps classes to
API status codes in one table.

Errors keep their class across Spark. A sparkcdc error raised in a Spark task
(or in the driver's ``foreachBatch`` function, or in the streaming source)
reaches the driver only as text: PySpark formats the Python traceback, the JVM
wraps it, Py4J hands it back inside ``query.exception()`` or the failed
``collect()``. Python prints an exception's notes (PEP 678) under its
``Type: message`` line, so every ``SparkCdcError`` has one note, its marker::

    SPARKCDC-ERROR {"class": "SinkUnavailable", "code": "CDC:ErrSinkUnavailable", "transient": true, "message": "..."}

The marker is one line of ASCII JSON (any message text survives: quotes,
newlines, regex characters) and appears only in tracebacks: ``str(err)`` and
``err.message`` stay the human text. ``map_spark_error`` is the one place that
reads it back. A failure without a marker is an ``UnclassifiedError``: retried
``MAX_UNCLASSIFIED_RETRIES`` times, then permanent (``retry_verdict``); one where Spark says it
lost a process of its own (``SPARK_PASSING_FAULTS``) is a passing fault, ``SparkWorkerLost``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

MARKER = "SPARKCDC-ERROR "
"""Starts the line that carries a sparkcdc error through Spark's error text."""

MAX_UNCLASSIFIED_RETRIES = 5
"""How many times a changefeed is restarted after errors sparkcdc does not recognise before it fails."""

_CLASSES: dict[str, type[SparkCdcError]] = {}
"""Every SparkCdcError class by name, for ``map_spark_error``."""

_CHAIN_LINES = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)
"""The lines Python prints between the exceptions of a chain."""


class SparkCdcError(Exception):
    """Base of every sparkcdc error."""

    code = "CDC:ErrUnknown"
    transient = False

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _CLASSES[cls.__name__] = cls

    @property
    def message(self) -> str:
        """The human-readable message."""
        return str(self.args[0]) if self.args else ""

    def to_dict(self) -> dict[str, str]:
        """The error as the API shows it."""
        return {"error_code": self.code, "error_msg": self.message}

    def marker(self) -> str:
        """The line that carries this error through Spark's error text (see the module doc)."""
        payload = {
            "class": type(self).__name__,
            "code": self.code,
            "transient": bool(self.transient),
            "message": self.message,
        }
        return MARKER + json.dumps(payload)

    if not TYPE_CHECKING:  # hidden from mypy, which would otherwise accept any attribute name

        def __getattr__(self, name: str) -> Any:
            # The notes are made when first asked for (by the traceback module, as the error is
            # printed), so the marker carries the message as it is then, even if args were changed.
            if name == "__notes__":
                notes = [self.marker()]
                self.__dict__["__notes__"] = notes
                return notes
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


_CLASSES[SparkCdcError.__name__] = SparkCdcError


class PermanentError(SparkCdcError):
    """Retrying will not help: the changefeed goes to ``failed``."""


class TransientError(SparkCdcError):
    """A passing fault: retried with backoff, shown as a warning."""

    transient = True


class UnclassifiedError(TransientError):
    """A failure sparkcdc does not recognise (no sparkcdc error in it).

    Retried like a passing fault, but only ``MAX_UNCLASSIFIED_RETRIES`` times in a row: then the
    changefeed fails with it (``retry_verdict``) instead of restarting forever.
    """

    code = "CDC:ErrUnknown"


class SparkWorkerLost(TransientError):
    """Spark lost a process of its own (a Python worker that died or did not start in time, an
    executor): a passing fault of the host, retried like any other (``SPARK_PASSING_FAULTS``)."""

    code = "CDC:ErrSparkWorkerLost"


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


class RequestTooLarge(ConfigError):
    """An API request body over the server's limit."""

    code = "CDC:ErrAPIBodyTooLarge"


HTTP_STATUS: dict[type[SparkCdcError], int] = {
    ConfigError: 400,
    RequestTooLarge: 413,
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


def _rebuild(payload: dict[str, Any]) -> SparkCdcError:
    """The error a marker describes: the same class (or the nearest base), code, flag and message."""
    transient = bool(payload.get("transient"))
    cls = _CLASSES.get(str(payload.get("class")))
    if cls is None:  # a class this process has not imported: the base that retries the same way
        cls = TransientError if transient else PermanentError
    # The class's own __init__ is not run: the message is final already (a subclass may build it).
    err = cls.__new__(cls)
    SparkCdcError.__init__(err, str(payload.get("message", "")), code=str(payload.get("code") or cls.code))
    if err.transient != transient:
        err.transient = transient
    return err


def _summary(exc: BaseException, text: str) -> str:
    """One line saying what failed: the last Python exception line of a traceback, else the first line.

    A traceback may start inside a line (``query.exception()`` says "... Return Message:
    Traceback ..."). When that Python line is PySpark's ``Py4JJavaError`` (a Spark job the Python
    code ran failed in the JVM, e.g. a task that could not even start), it names only the JVM call,
    so the JVM's root cause (its last ``Caused by:``) follows it.
    """
    lines = text.splitlines()
    starts = [
        i for i, line in enumerate(lines) if line.rstrip().endswith("Traceback (most recent call last):")
    ]
    if starts:
        # Frames and source lines are indented; the first line that is not is "Type: message".
        for j in range(starts[-1] + 1, len(lines)):
            line = lines[j]
            if line.strip() and not line[0].isspace():
                if "Py4JJavaError" in line:
                    cause = _jvm_cause(lines[j + 1 :])
                    if cause:
                        return f"{line.strip()} {cause}"[:1000]
                return line[:500]
    first = next((line.strip() for line in lines if line.strip()), "") or repr(exc)
    return f"{type(exc).__name__}: {first}"[:500]


def _jvm_cause(lines: list[str]) -> str:
    """The root cause of a JVM stack trace: its last ``Caused by:`` line, else its first line."""
    causes = [line for line in lines if line.startswith("Caused by: ")]
    if causes:
        return causes[-1].strip()
    return next((line.strip().lstrip(": ") for line in lines if line.strip()), "")


SPARK_PASSING_FAULTS: tuple[tuple[str, str], ...] = (
    ("Python worker failed to connect back", "a Spark Python worker did not start in time"),
    ("Can not open socket", "a Spark Python worker could not reach its JVM in time"),
    ("Python worker exited unexpectedly", "a Spark Python worker died"),
    ("ExecutorLostFailure", "Spark lost an executor"),
)
"""Failures Spark reports for processes of its own, without a sparkcdc error in them: the only
texts ``map_spark_error`` reads besides the marker. An overloaded host (a worker that starts after
Spark's connect-back timeout) or a killed worker are passing faults, retried until
``--error-stuck-seconds``, not unrecognised errors that fail a changefeed after five tries."""


def map_spark_error(exc: BaseException) -> SparkCdcError:
    """The sparkcdc error that ``exc`` is or carries; an ``UnclassifiedError`` when it carries none.

    ``exc`` is usually what Spark raised on the driver (``query.exception()``, a failed
    ``collect()``); its text holds the Python tracebacks of the failure, wrapped by the JVM once
    or several times. The last marker in the text is the error that ended the failing Python
    code: Python prints a chain of exceptions oldest first, so an error raised while handling
    another (``raise SinkError(...) from exc`` on the driver after a task failed) comes after the
    one it handled, and the JVM's wrappers only repeat the same traceback. A Python chain line
    after the last marker means a later exception that is not a sparkcdc error ended it: that
    failure is unclassified, unless Spark says it lost a process of its own
    (``SPARK_PASSING_FAULTS``, a ``SparkWorkerLost``). Nothing else in the text is read.
    """
    if isinstance(exc, SparkCdcError):
        return exc
    text = str(exc)
    at = text.rfind("\n" + MARKER)
    at = at + 1 if at >= 0 else (0 if text.startswith(MARKER) else -1)
    if at >= 0 and not any(sep in text[at:] for sep in _CHAIN_LINES):
        try:
            payload, _end = json.JSONDecoder().raw_decode(text, at + len(MARKER))
        except ValueError:
            payload = None
        if isinstance(payload, dict):
            return _rebuild(payload)
    for needle, what in SPARK_PASSING_FAULTS:
        if needle in text:
            return SparkWorkerLost(f"{what}: {_summary(exc, text)}")
    return UnclassifiedError(_summary(exc, text))


def retry_verdict(
    err: SparkCdcError, unclassified_retries: int, limit: int = MAX_UNCLASSIFIED_RETRIES
) -> SparkCdcError | None:
    """After ``err`` stopped a changefeed: None to restart it, or the error it fails with.

    ``unclassified_retries`` is how many restarts in a row (without progress in between) already
    followed unclassified errors; the caller counts them. A permanent error fails at once, a known
    passing fault is retried, an unclassified error is retried ``limit`` times, then it is permanent.
    """
    if not err.transient:
        return err
    if isinstance(err, UnclassifiedError) and unclassified_retries >= limit:
        first = err.message.splitlines()[0] if err.message else type(err).__name__
        return PermanentError(
            f"retried {unclassified_retries} times, still failing with an error sparkcdc does not "
            f"recognise: {first}",
            code=err.code,
        )
    return None
