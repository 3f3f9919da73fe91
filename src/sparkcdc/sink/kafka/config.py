"""Kafka sink options: the sink URI merged with ``[sink.kafka-config]`` (the URI wins), closed and typed.

``OPTIONS`` declares every parameter of spec §6 with its limits (TiCDC's where it has them:
``tiflow:pkg/sink/kafka/options.go``, ``pkg/sink/codec/common/config.go``; librdkafka's
otherwise). ``KafkaOptions.parse(uri, config)`` resolves them, refuses unknown ones and bad
values with the key, the value, where it came from and what is allowed, and
``producer_config()`` maps the result onto librdkafka settings.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sparkcdc.config.options import Kind, Option, OptionTable, Resolved, not_supported, resolve
from sparkcdc.config.replica import MAX_BATCH_SIZE_WHY
from sparkcdc.config.uri import ParsedURI, redact_uri
from sparkcdc.errors import ConfigError, SinkURIError

if TYPE_CHECKING:
    from sparkcdc.config.replica import ReplicaConfig


class _LibrdkafkaLog:
    """Where librdkafka's own log lines go: the ``sparkcdc.kafka.librdkafka`` logger, at DEBUG.

    librdkafka prints a line for every failed connection attempt (some 200 before a dead broker is
    given up on); the error callbacks (``producer.BrokerState``, the admin and consumer calls) report
    the same state once, as a warning or an error naming the brokers. ``--log-level debug`` shows
    the lines.
    """

    def __init__(self) -> None:
        self.logger = logging.getLogger("sparkcdc.kafka.librdkafka")

    def log(self, level: int, msg: str, *args: Any) -> None:
        """Called by confluent-kafka (from poll) for each librdkafka log line."""
        self.logger.debug(msg, *args)

    def __repr__(self) -> str:
        # producer_config() items are part of the shared producer's cache key.
        return "LIBRDKAFKA_LOG"


LIBRDKAFKA_LOG = _LibrdkafkaLog()

DEFAULT_MAX_MESSAGE_BYTES = 10 * 1024 * 1024
DEFAULT_PARTITION_NUM = 3
LIBRDKAFKA_MAX_MESSAGE_BYTES = 1_000_000_000
"""The largest ``message.max.bytes`` librdkafka accepts."""
PRODUCER_QUEUE_MESSAGES = 20_000
"""Messages a producer holds unacknowledged before ``produce`` waits for the broker (backpressure)."""
MESSAGE_HEADROOM = 4096
"""Room above max-message-bytes in the producer's ``message.max.bytes`` (key and record overhead)."""
MAX_MAX_MESSAGE_BYTES = LIBRDKAFKA_MAX_MESSAGE_BYTES - MESSAGE_HEADROOM
MAX_SOCKET_TIMEOUT = 300.0
"""librdkafka's upper limit of ``socket.timeout.ms`` (5 minutes), which read/write-timeout set."""
MESSAGE_OVERHEAD = 36
"""TiCDC's per-message size accounting: len(key) + len(value) + 36."""
ROW_SEQ_HEADER = "sparkcdc-row-seq"
"""The Kafka header on each message of a table without a handle key (no primary or NOT NULL unique
key): its place among its transaction's messages of that table kind in its partition (0, 1, …). A
batch sent again after a crash repeats the same numbers, so a consumer drops the copies, which it
could not tell from new rows of the same transaction otherwise (a table with a handle key needs no
header: applying its rows again is idempotent). Consumers that do not know it ignore it."""
DEFAULT_MESSAGE_TIMEOUT = 300.0

KNOWN_PROTOCOLS = (
    "canal-json",
    "open-protocol",
    "avro",
    "maxwell",
    "canal",
    "craft",
    "debezium",
    "simple",
)
PROTOCOL_ALIASES = {"default": "open-protocol", "flat-avro": "avro"}
COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")
REQUIRED_ACKS = (-1, 0, 1)
INT16_MAX = 32767
INT32_MAX = 2147483647
SASL_MECHANISMS = {
    "plain": "PLAIN",
    "scram-sha-256": "SCRAM-SHA-256",
    "scram-sha-512": "SCRAM-SHA-512",
    "gssapi": "GSSAPI",
    "oauthbearer": "OAUTHBEARER",
}
LARGE_MESSAGE_OPTIONS = ("none", "handle-key-only", "claim-check")
LARGE_MESSAGE_COMPRESSIONS = ("none", "lz4", "snappy")

_TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
_CLIENT_ID = re.compile(r"^[A-Za-z0-9._-]+$")
_CLIENT_ID_INVALID = re.compile(r'[?:,"]')

_KC = "kafka-config."
_CODEC = "kafka-config.codec-config."


def _timeout(name: str, *, le: float | None = None) -> Option:
    # librdkafka takes no connection-setup or request timeout under 1 s: refused, not raised to it
    return Option(name, Kind.DURATION, 10.0, toml=_KC + name, ge=1.0, le=le)


def _text(name: str, *, toml: bool = True, secret: bool = False) -> Option:
    return Option(name, Kind.STR, toml=_KC + name if toml else None, secret=secret)


OPTIONS = OptionTable(
    Option("protocol", Kind.STR, toml="protocol", help="the message protocol (required)"),
    # TiCDC's types bound them: partition-num int32 (> 0), replication-factor int16. Unset
    # partition-num: the topic's own partition count (or 3 for a topic the sink creates).
    Option("partition-num", Kind.INT, None, toml=_KC + "partition-num", gt=0, le=INT32_MAX),
    Option("replication-factor", Kind.INT, 1, toml=_KC + "replication-factor", gt=0, le=INT16_MAX),
    Option(
        "kafka-version",
        Kind.STR,
        "2.4.0",
        toml=_KC + "kafka-version",
        pattern=r"\d+\.\d+\.\d+(\.\d+)?",
        expect="a Kafka version like 2.4.0 or 3.6.1",
    ),
    Option(  # TiCDC: > 0; the producer's message.max.bytes must fit it with headroom
        "max-message-bytes",
        Kind.INT,
        DEFAULT_MAX_MESSAGE_BYTES,
        toml=_KC + "max-message-bytes",
        gt=0,
        le=MAX_MAX_MESSAGE_BYTES,
    ),
    Option("max-retry", Kind.INT, 5, ge=0, help="retries of one failed produce request"),
    Option("compression", Kind.ENUM, "none", toml=_KC + "compression", choices=COMPRESSIONS, fold_case=True),
    Option(
        "kafka-client-id",
        Kind.STR,
        toml=_KC + "kafka-client-id",
        pattern=r"[A-Za-z0-9._-]+",
        expect="a client ID of characters [A-Za-z0-9._-]",
    ),
    Option("auto-create-topic", Kind.BOOL, True, toml=_KC + "auto-create-topic"),
    _timeout("dial-timeout"),
    _timeout("read-timeout", le=MAX_SOCKET_TIMEOUT),
    _timeout("write-timeout", le=MAX_SOCKET_TIMEOUT),
    Option(
        "message-timeout",
        Kind.DURATION,
        DEFAULT_MESSAGE_TIMEOUT,
        ge=1.0,
        help="how long a message may wait for a broker before the changefeed fails",
    ),
    Option("required-acks", Kind.INT, -1, toml=_KC + "required-acks", choices=REQUIRED_ACKS),
    _text("sasl-user"),
    _text("sasl-password", secret=True),
    Option(
        "sasl-mechanism",
        Kind.ENUM,
        toml=_KC + "sasl-mechanism",
        choices=tuple(SASL_MECHANISMS.values()),
        fold_case=True,
    ),
    Option("sasl-gssapi-auth-type", Kind.ENUM, choices=("keytab", "user"), fold_case=True),
    _text("sasl-gssapi-keytab-path", toml=False),
    _text("sasl-gssapi-kerberos-config-path", toml=False),
    _text("sasl-gssapi-service-name", toml=False),
    _text("sasl-gssapi-user", toml=False),
    _text("sasl-gssapi-password", toml=False, secret=True),
    _text("sasl-gssapi-realm", toml=False),
    Option("sasl-gssapi-disable-pafxfast", Kind.BOOL),
    Option("enable-tls", Kind.BOOL, toml=_KC + "enable-tls"),
    _text("ca"),
    _text("cert"),
    _text("key", secret=True),
    Option("insecure-skip-verify", Kind.BOOL, False, toml=_KC + "insecure-skip-verify"),
    Option("enable-tidb-extension", Kind.BOOL, False, toml=_CODEC + "enable-tidb-extension"),
    Option(
        "max-batch-size", Kind.INT, 1, toml=_CODEC + "max-batch-size", gt=0, unsupported=MAX_BATCH_SIZE_WHY
    ),
    Option("only-output-updated-columns", Kind.BOOL),
    Option("content-compatible", Kind.BOOL),
)
"""The Kafka sink's URI parameters (``transaction-atomicity`` and the avro encoder's are read apart)."""

# URI parameters read by the protocol's encoder (avro) rather than by the sink itself.
AVRO_URI_PARAMETERS = (
    "avro-decimal-handling-mode",
    "avro-bigint-unsigned-handling-mode",
    "avro-enable-watermark",
    "schema-registry",
)


def normalize_protocol(raw: str) -> str:
    """Lower-case a protocol name and resolve its aliases; unknown names raise ConfigError."""
    name = raw.strip().lower()
    name = PROTOCOL_ALIASES.get(name, name)
    if name not in KNOWN_PROTOCOLS:
        raise SinkURIError(
            f"unknown protocol {raw!r} in the sink URI; TiCDC protocols are: "
            f"{', '.join(KNOWN_PROTOCOLS)} (aliases: default = open-protocol, flat-avro = avro)"
        )
    return name


@dataclass(frozen=True)
class LargeMessageOptions:
    """``[sink.kafka-config.large-message-handle]``, validated."""

    option: str = "none"
    compression: str = "none"
    claim_check_storage_uri: str = ""
    claim_check_raw_value: bool = False

    @property
    def handle_key_only(self) -> bool:
        """Oversized messages carry only the handle-key columns."""
        return self.option == "handle-key-only"

    @property
    def claim_check(self) -> bool:
        """Oversized messages go to external storage, a reference goes to Kafka."""
        return self.option == "claim-check"


@dataclass(frozen=True)
class KafkaOptions:
    """Everything the Kafka sink needs from its URI and the changefeed config."""

    brokers: tuple[str, ...]
    topic: str
    protocol: str
    partition_num: int | None = None
    replication_factor: int = 1
    kafka_version: str = "2.4.0"
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    max_retry: int = 5
    compression: str = "none"
    client_id: str = ""
    auto_create_topic: bool = True
    dial_timeout: float = 10.0
    read_timeout: float = 10.0
    write_timeout: float = 10.0
    message_timeout: float = DEFAULT_MESSAGE_TIMEOUT
    required_acks: int = -1
    sasl_user: str = ""
    sasl_password: str = ""
    sasl_mechanism: str = ""
    sasl_gssapi: dict[str, str] = field(default_factory=dict)
    enable_tls: bool = False
    ca: str = ""
    cert: str = ""
    key: str = ""
    insecure_skip_verify: bool = False
    enable_tidb_extension: bool = False
    only_output_updated_columns: bool | None = None
    content_compatible: bool | None = None
    output_raw_change_event: bool = False
    large_message: LargeMessageOptions = field(default_factory=LargeMessageOptions)
    uri: str = ""
    """The sink URI as given (the avro encoder reads its own parameters from it)."""

    @classmethod
    def parse(
        cls, uri: str, config: ReplicaConfig, changefeed_id: str = "default", *, consumer: bool = False
    ) -> KafkaOptions:
        """Read and validate the sink URI and ``[sink.kafka-config]`` (URI wins over config).

        ``consumer=True`` reads a consumer's upstream URI: the producer-only checks
        (large-message handling) are skipped.
        """
        p = ParsedURI.parse(uri)
        shown = redact_uri(uri)
        if p.scheme not in ("kafka", "kafka+ssl"):
            raise SinkURIError(f"the Kafka sink needs a kafka:// or kafka+ssl:// URI, got {shown!r}")
        brokers = tuple(f"{h}:{port or 9092}" for h, port in p.hosts if h)
        if not brokers:
            raise SinkURIError(
                f"no Kafka broker in sink URI {shown!r}: use kafka://host:9092[,host2:9092]/topic"
            )
        topic = p.path.strip("/")
        if not topic:
            raise SinkURIError(
                f"no topic is specified in sink-uri {shown!r}: put the default topic in the path, "
                "like kafka://127.0.0.1:9092/my-topic?protocol=canal-json"
            )
        if not _TOPIC_NAME.match(topic) or topic in (".", ".."):
            raise SinkURIError(
                f"invalid topic name {topic!r} in sink URI {shown!r}: a Kafka topic name has 1-249 "
                "characters from [A-Za-z0-9._-] and is not '.' or '..'"
            )
        o = resolve(OPTIONS, p, config.sink, where="sink")
        if not o["protocol"]:
            raise SinkURIError(
                f"no protocol in sink URI {shown!r}: add ?protocol=canal-json (or avro), "
                "or set protocol under [sink] in the changefeed config"
            )
        protocol = normalize_protocol(o["protocol"])
        client_id = o["kafka-client-id"]
        if not client_id:
            client_id = _CLIENT_ID_INVALID.sub("_", f"sparkcdc_producer_default_{changefeed_id}")
            if not _CLIENT_ID.match(client_id):
                raise SinkURIError(
                    f"invalid kafka client ID {client_id!r} made from the changefeed ID: set "
                    "kafka-client-id to a name of characters [A-Za-z0-9._-]"
                )
        sasl = _sasl(o, shown)
        enable_tls, ca = _tls(o, p.scheme)
        for where, value in (
            ("sink URI", p.get_str("transaction-atomicity")),
            ("[sink] config", config.sink.transaction_atomicity),
        ):
            if value not in (None, "", "none"):
                raise SinkURIError(
                    f"invalid transaction-atomicity {value!r} in the {where}: the Kafka sink only supports "
                    "'none' (a transaction may be split across messages and partitions)"
                )
        for name in AVRO_URI_PARAMETERS:
            if protocol == "avro":
                p.get(name)  # read and validated by the avro encoder
            elif p.get(name) is not None:
                raise SinkURIError(
                    f"sink URI parameter {name!r} only applies to protocol avro (the protocol is {protocol})"
                )
        p.reject_unknown()

        large = (
            LargeMessageOptions()
            if consumer
            else _large_message(config, protocol, o["enable-tidb-extension"])
        )
        if large.option != "none" and config.force_replicate:
            raise ConfigError(
                f'force-replicate must be disabled, when the large message handle option is set to "{large.option}"'
            )
        return cls(
            brokers=brokers,
            topic=topic,
            protocol=protocol,
            partition_num=o["partition-num"],
            replication_factor=o["replication-factor"],
            kafka_version=o["kafka-version"],
            max_message_bytes=o["max-message-bytes"],
            max_retry=o["max-retry"],
            compression=o["compression"],
            client_id=client_id,
            auto_create_topic=o["auto-create-topic"],
            dial_timeout=o["dial-timeout"],
            read_timeout=o["read-timeout"],
            write_timeout=o["write-timeout"],
            message_timeout=o["message-timeout"],
            required_acks=o["required-acks"],
            sasl_user=sasl.user,
            sasl_password=sasl.password,
            sasl_mechanism=sasl.mechanism,
            sasl_gssapi=sasl.gssapi,
            enable_tls=enable_tls,
            ca=ca,
            cert=o["cert"] or "",
            key=o["key"] or "",
            insecure_skip_verify=o["insecure-skip-verify"] and enable_tls,
            enable_tidb_extension=o["enable-tidb-extension"],
            only_output_updated_columns=o["only-output-updated-columns"],
            content_compatible=o["content-compatible"],
            output_raw_change_event=config.sink.kafka_config.output_raw_change_event,
            large_message=large,
            uri=uri,
        )

    @property
    def bootstrap_servers(self) -> str:
        """``bootstrap.servers`` for librdkafka."""
        return ",".join(self.brokers)

    def common_config(self) -> dict[str, Any]:
        """librdkafka settings shared by the producer, the admin client and consumers."""
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "client.id": self.client_id,
            "socket.connection.setup.timeout.ms": int(self.dial_timeout * 1000),
            "socket.timeout.ms": int(max(self.read_timeout, self.write_timeout) * 1000),
            # come back within ~2s once a broker is reachable again (librdkafka's default caps at 10s)
            "reconnect.backoff.ms": 100,
            "reconnect.backoff.max.ms": 2000,
            # librdkafka asks each broker for its API versions; kafka-version is what it assumes of a
            # broker that does not answer that request (TiCDC's client sets its protocol by it)
            "broker.version.fallback": self.kafka_version,
            "logger": LIBRDKAFKA_LOG,
        }
        if self.sasl_mechanism:
            conf["security.protocol"] = "SASL_SSL" if self.enable_tls else "SASL_PLAINTEXT"
            conf["sasl.mechanism"] = self.sasl_mechanism
            if self.sasl_mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
                conf["sasl.username"] = self.sasl_user
                conf["sasl.password"] = self.sasl_password
            elif self.sasl_mechanism == "GSSAPI":
                conf.update(self.sasl_gssapi)
        elif self.enable_tls:
            conf["security.protocol"] = "SSL"
        if self.enable_tls:
            if self.ca:
                conf["ssl.ca.location"] = self.ca
            if self.cert:
                conf["ssl.certificate.location"] = self.cert
                conf["ssl.key.location"] = self.key
            conf["enable.ssl.certificate.verification"] = not self.insecure_skip_verify
            if self.insecure_skip_verify:
                conf["ssl.endpoint.identification.algorithm"] = "none"
        return conf

    def producer_config(self) -> dict[str, Any]:
        """librdkafka producer settings: acks, compression, ordering-safe retries, size limits."""
        conf = self.common_config()
        conf["acks"] = "all" if self.required_acks == -1 else str(self.required_acks)
        conf["compression.type"] = self.compression
        # a single message may be max-message-bytes (+ key + record overhead); librdkafka refuses
        # anything above its own message.max.bytes, so make room for it (bounded by librdkafka's max)
        conf["message.max.bytes"] = min(
            LIBRDKAFKA_MAX_MESSAGE_BYTES, max(1_000_000, self.max_message_bytes + MESSAGE_HEADROOM)
        )
        conf["message.timeout.ms"] = int(self.message_timeout * 1000)
        conf["request.timeout.ms"] = int(self.write_timeout * 1000)
        conf["linger.ms"] = 5
        # librdkafka queues up to 100,000 messages by default; a writer produces faster than the
        # broker acknowledges, so the queue would hold a whole segment's messages in the worker
        conf["queue.buffering.max.messages"] = PRODUCER_QUEUE_MESSAGES
        # a delivery report per acknowledged message is a Python callback per message (4-7 % of the
        # producing CPU, bench/kafka/delivery_reports.py): only failures are reported, and a
        # drained queue means acknowledged
        conf["delivery.report.only.error"] = True
        if self.required_acks == -1 and self.max_retry > 0:
            # idempotence keeps each partition's order across retries and reconnects
            conf["enable.idempotence"] = True
            conf["max.in.flight.requests.per.connection"] = 5
        else:
            # without idempotence, one request in flight is the only way retries cannot reorder
            conf["enable.idempotence"] = False
            conf["max.in.flight.requests.per.connection"] = 1
        # max-retry bounds the retries of one failed produce request; messages waiting for a broker
        # that is down are not retried requests, they wait up to message-timeout
        conf["retries"] = self.max_retry
        conf["retry.backoff.ms"] = 100
        conf["retry.backoff.max.ms"] = 1000
        return conf

    def admin_config(self) -> dict[str, Any]:
        """librdkafka admin-client settings."""
        return self.common_config()


@dataclass(frozen=True)
class _SASL:
    user: str
    password: str
    mechanism: str
    gssapi: dict[str, str]


def _sasl(o: Resolved, shown: str) -> _SASL:
    """The SASL settings: user and password imply PLAIN; a password mechanism needs both."""
    user = o["sasl-user"] or ""
    password = o["sasl-password"] or ""
    mechanism = o["sasl-mechanism"] or ""
    gssapi = _gssapi(o, mechanism)
    if (user or password) and not mechanism:
        mechanism = "PLAIN"
    if mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") and not (user and password):
        raise SinkURIError(
            f"sasl-mechanism {mechanism} needs both sasl-user and sasl-password in sink URI {shown!r}"
        )
    return _SASL(user, password, mechanism, gssapi)


def _tls(o: Resolved, scheme: str) -> tuple[bool, str]:
    """Whether TLS is on, and the CA file: credential files or kafka+ssl:// turn it on."""
    ca, cert, key = o["ca"] or "", o["cert"] or "", o["key"] or ""
    if (cert or key) and not ca:
        raise SinkURIError("ca, cert and key files should all be supplied (got cert/key without ca)")
    if bool(cert) != bool(key):
        raise SinkURIError("ca, cert and key files should all be supplied (cert and key go together)")
    tls_param = o["enable-tls"]
    if tls_param is False and ca:
        raise SinkURIError(
            "credential files are supplied, but 'enable-tls' is set to false; remove ca/cert/key or enable TLS"
        )
    if tls_param is False and scheme == "kafka+ssl":
        raise SinkURIError("the kafka+ssl:// scheme needs TLS, but 'enable-tls' is set to false")
    return bool(tls_param) or bool(ca) or scheme == "kafka+ssl", ca


_GSSAPI = (
    "sasl-gssapi-auth-type",
    "sasl-gssapi-keytab-path",
    "sasl-gssapi-kerberos-config-path",
    "sasl-gssapi-service-name",
    "sasl-gssapi-user",
    "sasl-gssapi-password",
    "sasl-gssapi-realm",
    "sasl-gssapi-disable-pafxfast",
)


def _gssapi(o: Resolved, mechanism: str) -> dict[str, str]:
    if all(o[name] is None for name in _GSSAPI):
        return {}
    if mechanism != "GSSAPI":
        raise SinkURIError("sasl-gssapi-* parameters need sasl-mechanism=GSSAPI")
    kind = o["sasl-gssapi-auth-type"] or "keytab"
    if kind == "user" or o["sasl-gssapi-password"]:
        raise SinkURIError(
            "sasl-gssapi-auth-type=user (password login) is not supported by librdkafka: "
            "use sasl-gssapi-auth-type=keytab with sasl-gssapi-keytab-path"
        )
    if o["sasl-gssapi-kerberos-config-path"]:
        raise SinkURIError(
            "sasl-gssapi-kerberos-config-path is not supported by librdkafka: set KRB5_CONFIG in the "
            "environment of the sparkcdc processes instead"
        )
    keytab, user, realm = o["sasl-gssapi-keytab-path"], o["sasl-gssapi-user"], o["sasl-gssapi-realm"]
    if not keytab or not user:
        raise SinkURIError("GSSAPI with a keytab needs sasl-gssapi-keytab-path and sasl-gssapi-user")
    return {
        "sasl.kerberos.keytab": keytab,
        "sasl.kerberos.principal": f"{user}@{realm}" if realm else user,
        "sasl.kerberos.service.name": o["sasl-gssapi-service-name"] or "kafka",
    }


def _large_message(config: ReplicaConfig, protocol: str, extension: bool) -> LargeMessageOptions:
    lm = config.sink.kafka_config.large_message_handle
    option = (lm.large_message_handle_option or "none").strip().lower()
    if option not in LARGE_MESSAGE_OPTIONS:
        raise ConfigError(
            f"invalid value {lm.large_message_handle_option!r} for "
            f"'sink.kafka-config.large-message-handle.large-message-handle-option'; "
            f"allowed: {', '.join(LARGE_MESSAGE_OPTIONS)}"
        )
    compression = (lm.large_message_handle_compression or "none").strip().lower()
    if compression not in LARGE_MESSAGE_COMPRESSIONS:
        raise ConfigError(
            f"large message handle compression is not supported, got {compression!r}; "
            f"allowed: {', '.join(LARGE_MESSAGE_COMPRESSIONS)}"
        )
    if compression != "none":
        raise not_supported(
            f"large-message-handle-compression = {compression!r}",
            "Kafka's own compression setting still applies",
            fix='use "none"',
            ticdc=True,
        )
    if option != "none":
        if protocol != "canal-json":
            raise ConfigError(
                f"large message handle is set to {option}, protocol is {protocol}, it's not supported; "
                'use large-message-handle-option = "none" or protocol canal-json'
            )
        if not extension:
            raise ConfigError(
                f"large message handle is set to {option}, protocol is {protocol}, but "
                "enable-tidb-extension is false; add enable-tidb-extension=true to the sink URI"
            )
    if option == "claim-check" and not lm.claim_check_storage_uri:
        raise ConfigError(
            "large message handle is set to claim-check, but the claim-check-storage-uri is empty; set "
            "claim-check-storage-uri (like file:///data/claim-check or s3://bucket/prefix) under "
            "[sink.kafka-config.large-message-handle]"
        )
    return LargeMessageOptions(
        option=option,
        compression=compression,
        claim_check_storage_uri=lm.claim_check_storage_uri,
        claim_check_raw_value=lm.claim_check_raw_value,
    )
