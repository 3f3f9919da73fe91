"""The marker that carries a sparkcdc error through Spark's error text, and its one decoder.

No Spark here: the texts are what Python's traceback module prints (what PySpark sends from a
worker) and the shapes PySpark wraps them in. tests/unit/pipeline/test_spark_errors.py crosses a
real local Spark.
"""

from __future__ import annotations

import json
import traceback

import pytest

from sparkcdc.errors import (
    MARKER,
    MessageTooLargeError,
    PermanentError,
    SinkError,
    SinkUnavailable,
    SparkCdcError,
    TransientError,
    UnclassifiedError,
    UpstreamUnavailable,
    map_spark_error,
)


class CustomBuiltError(SinkError):
    """An error class defined outside sparkcdc.errors whose __init__ builds its message."""

    code = "CDC:ErrTestCustom"

    def __init__(self, table: str) -> None:
        super().__init__(f"table {table} refused")


def printed(exc: BaseException) -> str:
    """What a Python worker sends to the JVM for an exception that escaped."""
    return "".join(traceback.format_exception(exc))


def raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:
        return caught


def spark_text(python_traceback: str) -> str:
    """How the driver shows it: PySpark's header, then the streaming query's wrapper."""
    return (
        "An exception was raised by the Python Proxy. Return Message: Traceback (most recent call last):\n"
        '  File "driver.py", line 1, in fb\n'
        "pyspark.errors.exceptions.captured.PythonException: An exception was thrown from the Python worker:\n"
        f"{python_traceback}\n"
        "=== Streaming Query ===\nIdentifier: [id = 1, runId = 2]\n"
    )


class Wrapped(Exception):
    """A stand-in for Py4J's and PySpark's exceptions: only its text counts."""


def test_the_marker_is_one_json_line_in_the_traceback_not_in_the_message() -> None:
    err = SinkUnavailable('kafka at 127.0.0.1:1 is "down"\nsecond line')
    assert str(err) == err.message == 'kafka at 127.0.0.1:1 is "down"\nsecond line'
    text = printed(raised(err))
    lines = [line for line in text.splitlines() if line.startswith(MARKER)]
    assert len(lines) == 1
    assert json.loads(lines[0][len(MARKER) :]) == {
        "class": "SinkUnavailable",
        "code": "CDC:ErrSinkUnavailable",
        "transient": True,
        "message": 'kafka at 127.0.0.1:1 is "down"\nsecond line',
    }
    assert lines[0].isascii()
    # With SPARK_HIDE_TRACEBACK a worker sends only the exception's lines: the note is among them.
    assert any(line.startswith(MARKER) for line in traceback.format_exception_only(err))


def test_the_marker_carries_the_message_as_it_is_when_printed() -> None:
    err = SinkUnavailable("3 messages failed")
    err.args = (f"{err.args[0]} (in this batch)",)  # the Kafka producer does this before raising
    err.add_note("another note")
    decoded = map_spark_error(Wrapped(spark_text(printed(raised(err)))))
    assert decoded.message == "3 messages failed (in this batch)"


@pytest.mark.parametrize(
    "err",
    [
        SinkUnavailable("sink down"),
        UpstreamUnavailable("upstream restarting"),
        MessageTooLargeError("message of 2 MiB > max-message-bytes 1 MiB"),
        SinkError("refused", code="CDC:ErrSinkSpecific"),
        UnclassifiedError("ValueError: boom"),
        CustomBuiltError("app.t"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_an_error_comes_back_with_its_class_code_flag_and_message(err: SparkCdcError) -> None:
    back = map_spark_error(Wrapped(spark_text(printed(raised(err)))))
    assert type(back) is type(err)
    assert (back.code, back.transient, back.message) == (err.code, err.transient, err.message)


@pytest.mark.parametrize(
    "message",
    [
        r"sparkcdc.errors.SinkError: (.+) \d+ [a-z]* ^$ \\",
        "line one\nline two\n\nSPARKCDC-ERROR {not json}\nline five",
        "quotes \" ' `, braces {} [], unicode é 表 \u2028 and a tab\there",
        "",
    ],
)
def test_any_message_text_survives(message: str) -> None:
    back = map_spark_error(Wrapped(spark_text(printed(raised(SinkUnavailable(message))))))
    assert type(back) is SinkUnavailable and back.message == message


def test_the_last_marker_is_the_error_that_ended_the_code() -> None:
    # The driver's foreachBatch caught the task's SinkUnavailable and raised a SinkError from it:
    # Python prints the cause first, the error that escaped last.
    task_failure = Wrapped(spark_text(printed(raised(SinkUnavailable("task: sink down")))))
    try:
        try:
            raise task_failure
        except Wrapped as exc:
            raise SinkError("the driver gave up on the batch") from exc
    except SinkError as escaped:
        text = spark_text(printed(escaped))
    assert text.count(MARKER) == 2
    back = map_spark_error(Wrapped(text))
    assert type(back) is SinkError and back.message == "the driver gave up on the batch"


def test_a_plain_error_raised_while_handling_a_sparkcdc_error_is_unclassified() -> None:
    try:
        try:
            raise SinkUnavailable("sink down")
        except SinkUnavailable:
            raise KeyError("bug in the handler")  # noqa: B904 (the implicit chain is the point)
    except KeyError as escaped:
        text = spark_text(printed(escaped))
    assert MARKER in text
    back = map_spark_error(Wrapped(text))
    assert type(back) is UnclassifiedError
    assert back.message == "KeyError: 'bug in the handler'"


def test_a_failure_without_a_marker_is_unclassified_with_its_python_line() -> None:
    text = spark_text(printed(raised(ValueError("plain boom"))))
    back = map_spark_error(Wrapped(text))
    assert type(back) is UnclassifiedError and back.code == "CDC:ErrUnknown" and back.transient
    assert back.message == "ValueError: plain boom"


def test_a_failure_without_a_traceback_shows_its_first_line() -> None:
    back = map_spark_error(RuntimeError("py4j went away\ndetails"))
    assert type(back) is UnclassifiedError and back.message == "RuntimeError: py4j went away"
    jvm = Wrapped("Job aborted due to stage failure: ExecutorLostFailure (executor 1 exited)\n\tat org...")
    assert map_spark_error(jvm).message == (
        "Spark lost an executor: Wrapped: Job aborted due to stage failure: ExecutorLostFailure (executor 1 exited)"
    )


def test_free_text_that_looks_like_an_error_is_not_read() -> None:
    # What the old regex classified: a sparkcdc class name in the text, without a marker.
    text = "Traceback (most recent call last):\n  File 'x'\nsparkcdc.errors.SinkError: refused\n"
    assert type(map_spark_error(Wrapped(text))) is UnclassifiedError


def test_a_broken_last_marker_is_unclassified() -> None:
    good = printed(raised(SinkUnavailable("earlier")))
    text = good + MARKER + '{"class": "SinkError", "message": "cut he'
    assert type(map_spark_error(Wrapped(text))) is UnclassifiedError


def test_a_class_this_process_does_not_know_keeps_its_code_and_flag() -> None:
    def marker(**payload: object) -> Wrapped:
        return Wrapped("x: y\n" + MARKER + json.dumps(payload) + "\n")

    t = map_spark_error(marker(**{"class": "NotHere", "code": "CDC:ErrX", "transient": True, "message": "m"}))
    assert type(t) is TransientError and (t.code, t.message) == ("CDC:ErrX", "m")
    p = map_spark_error(
        marker(**{"class": "NotHere", "code": "CDC:ErrY", "transient": False, "message": "n"})
    )
    assert type(p) is PermanentError and (p.code, p.transient) == ("CDC:ErrY", False)


def test_a_sparkcdc_error_is_returned_as_it_is() -> None:
    err = SinkError("refused")
    assert map_spark_error(err) is err


@pytest.mark.parametrize(
    "jvm_text",
    [
        "org.apache.spark.SparkException: Python worker failed to connect back.\n\tat org.apache.spark...",
        "pyspark.errors.exceptions.base.PySparkRuntimeError: [CANNOT_OPEN_SOCKET] Can not open socket: "
        "[\"tried to connect to ('127.0.0.1', 45897), but an error occurred: timed out\"].",
        "org.apache.spark.SparkException: Python worker exited unexpectedly (crashed)",
        "ExecutorLostFailure (executor 1 exited caused by one of the running tasks) Reason: Remote RPC client "
        "disassociated.",
    ],
)
def test_spark_losing_a_process_of_its_own_is_a_passing_fault(jvm_text: str) -> None:
    """An overloaded host or a killed worker: retried until --error-stuck-seconds, not failed after five."""
    from sparkcdc.errors import SparkWorkerLost

    err = map_spark_error(RuntimeError(f"StreamingQueryException: Job aborted.\n{jvm_text}"))
    assert isinstance(err, SparkWorkerLost) and err.transient and err.code == "CDC:ErrSparkWorkerLost"
    assert not isinstance(err, UnclassifiedError)


def test_a_sparkcdc_error_wins_over_the_worker_texts_around_it() -> None:
    text = "Python worker exited unexpectedly\n" + printed(SinkError("bad batch"))
    err = map_spark_error(RuntimeError(text))
    assert isinstance(err, SinkError) and err.message == "bad batch"


def test_a_py4j_failure_names_the_jvm_root_cause() -> None:
    # The shape of query.exception() when the batch's job failed before any Python ran in a task.
    text = (
        "An exception was raised by the Python Proxy. Return Message: Traceback (most recent call last):\n"
        '  File "/x/writer.py", line 448, in _commit_messages\n'
        "    messages = [json.loads(r.msg) for r in out.collect()]\n"
        "py4j.protocol.Py4JJavaError: An error occurred while calling o812.collectToPython.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 9.0 failed 1 "
        "times, most recent failure: Lost task 0.0 in stage 9.0 (TID 12) (127.0.0.1 executor driver): "
        "java.io.IOException: boom\n"
        "\tat org.apache.spark.scheduler.ResultTask.runTask(ResultTask.scala:86)\n"
        "Driver stacktrace:\n"
        "\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2935)\n"
        "Caused by: java.io.IOException: boom\n"
        "\tat java.base/java.io.ObjectInputStream.readObject(ObjectInputStream.java:467)\n"
    )
    back = map_spark_error(Wrapped(text))
    assert type(back) is UnclassifiedError
    assert back.message == (
        "py4j.protocol.Py4JJavaError: An error occurred while calling o812.collectToPython. "
        "Caused by: java.io.IOException: boom"
    )
    no_cause = text.split("\tat org.apache.spark.scheduler.ResultTask")[0]
    assert map_spark_error(Wrapped(no_cause)).message.endswith(
        "(127.0.0.1 executor driver): java.io.IOException: boom"
    )
