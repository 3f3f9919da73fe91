"""Secrets are masked in anything shaped like a URI, whether or not it parses."""

from __future__ import annotations

import pytest

from sparkcdc.cli.main import error_line
from sparkcdc.config.uri import ParsedURI, redact_text, redact_uri, scrub_secrets, uri_secrets
from sparkcdc.errors import ConfigError, SinkURIError

SECRET = "Sekr3t"

REDACTED = [
    ("mysql://u:Sekr3t@h:3306/", "mysql://u:xxxxx@h:3306/"),
    ("mysql://u:p#Sekr3t@h:3306/?time-zone=UTC", "mysql://u:xxxxx@h:3306/?time-zone=UTC"),
    ("mysql://u:p/Sekr3t@h:3306/", "mysql://u:xxxxx@h:3306/"),
    ("mysql://u:p?Sekr3t@h:3306/", "mysql://u:xxxxx@h:3306/"),
    ("mysql://u:a@Sekr3t@h:3306/", "mysql://u:xxxxx@h:3306/"),
    ("mysql://u:Sekr3t@[::1:3306", "mysql://u:xxxxx@[::1:3306"),
    ("ftp://bob:Sekr3t@host/x", "ftp://bob:xxxxx@host/x"),
    ("mysql://u@h/", "mysql://u@h/"),
    ("file:///tmp/x?protocol=csv", "file:///tmp/x?protocol=csv"),
    (
        "s3://b/p?access-key=A&secret-access-key=Sekr3t&endpoint=http://h:9",
        "s3://b/p?access-key=xxxxx&secret-access-key=xxxxx&endpoint=http://h:9",
    ),
    (
        "kafka://h:9092/t?protocol=canal-json&sasl-password=Sekr3t&partition-num=3",
        "kafka://h:9092/t?protocol=canal-json&sasl-password=xxxxx&partition-num=3",
    ),
    ("azure://c/p?account-name=a&account-key=Sekr3t", "azure://c/p?account-name=a&account-key=xxxxx"),
    ("http://h/?token=Sekr3t&auth-header=Sekr3t", "http://h/?token=xxxxx&auth-header=xxxxx"),
    ("mysql://u:password@host:port/", "mysql://u:password@host:port/"),
]


@pytest.mark.parametrize(("uri", "shown"), REDACTED, ids=[u for u, _ in REDACTED])
def test_redact_uri_masks_the_password_and_secret_parameters(uri: str, shown: str) -> None:
    assert redact_uri(uri) == shown


def test_redact_text_masks_every_uri_in_a_message_and_leaves_the_rest() -> None:
    text = "cannot use 'mysql://root:Sekr3t@h:1/' nor ftp://a:b#Sekr3t@x/y; expected KEY=VALUE, password=yes"
    assert redact_text(text) == (
        "cannot use 'mysql://root:xxxxx@h:1/' nor ftp://a:xxxxx@x/y; expected KEY=VALUE, password=yes"
    )


def test_uri_secrets_and_scrub_find_passwords_quoted_outside_a_uri() -> None:
    argv = [
        "run",
        "--upstream-uri",
        "mysql://u:p%23Sekr3t@h/",
        "--sink-uri",
        "s3://b/?secret-access-key=K3y-Sekr3t",
    ]
    assert {"p%23Sekr3t", "p#Sekr3t", "K3y-Sekr3t"} <= set(uri_secrets(" ".join(argv)))
    assert scrub_secrets("driver said: bad password p#Sekr3t (K3y-Sekr3t)", argv) == (
        "driver said: bad password xxxxx (xxxxx)"
    )


def test_a_password_with_an_unencoded_delimiter_is_refused_without_echoing_it() -> None:
    with pytest.raises(SinkURIError) as exc:
        ParsedURI.parse("mysql://u:p#Sekr3t@h:3306/")
    assert "percent-encoded" in exc.value.message and SECRET not in exc.value.message


def test_error_line_is_one_coded_line_without_secrets() -> None:
    argv = ["run", "--upstream-uri", "mysql://u:Sekr3t@h/"]
    assert (
        error_line(ConfigError("bad\nvalue Sekr3t"), argv) == "Error: [CDC:ErrInvalidConfig] bad; value xxxxx"
    )
    assert error_line(RuntimeError("boom at mysql://u:Sekr3t@h/"), argv) == (
        "Error: [CDC:ErrUnknown] RuntimeError: boom at mysql://u:xxxxx@h/"
    )


def test_an_unexpected_error_is_one_line_and_debug_adds_the_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sparkcdc.cli.cmd_consumer as cmd_consumer
    import sparkcdc.cli.main as main

    def boom(_args: object) -> int:
        raise KeyError("mysql://u:Sekr3t@h/")

    monkeypatch.setattr(cmd_consumer, "run", boom)
    argv = ["consumer", "--upstream-uri", "file:///x?protocol=csv", "--downstream-uri", "mysql://u:Sekr3t@h/"]
    assert main.main(argv) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == ["Error: [CDC:ErrUnknown] KeyError: 'mysql://u:xxxxx@h/'"]
    assert main.main(["--debug", *argv]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and SECRET not in err
    assert err.splitlines()[-1] == "Error: [CDC:ErrUnknown] KeyError: 'mysql://u:xxxxx@h/'"


def test_a_failure_out_of_spark_prints_the_sparkcdc_error_it_carries_or_its_last_python_line() -> None:
    carried = RuntimeError("An error occurred while calling o42.start.\n" + SinkURIError("bad sink").marker())
    assert error_line(carried, []) == "Error: [CDC:ErrSinkURIInvalid] bad sink"
    spark = RuntimeError(
        'An error occurred.\nTraceback (most recent call last):\n  File "x.py", line 1, in f\n'
        "ZeroDivisionError: division by zero\n\tat org.apache.spark.Foo(Foo.java:1)\n\tat more"
    )
    assert error_line(spark, []) == "Error: [CDC:ErrUnknown] ZeroDivisionError: division by zero"
