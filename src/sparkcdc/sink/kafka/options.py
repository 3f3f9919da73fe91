"""Kafka sink options: the sink URI merged with ``[sink.kafka-config]`` (the URI wins), closed and typed.

``KafkaOptions.parse(uri, config)`` reads every parameter of spec §6, refuses
unknown ones and bad values with the key, the value and what is allowed, and
``librdkafka_config()`` maps the result onto librdkafka settings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sparkcdc.config.uri import ParsedURI, parse_duration, redact_uri
from sparkcdc.errors import ConfigError, SinkURIError

if TYPE_CHECKING:
    from sparkcdc.config.replica import ReplicaConfig

DEFAULT_MAX_MESSAGE_BYTES = 10 * 1024 * 1024
DEFAULT_PARTITION_NUM = 3
MESSAGE_OVERHEAD = 36
"""TiCDC's per-message size accounting: len(key) + len(value) + 36."""
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
_KAFKA_VERSION = re.compile(r"^\d+\.\d+\.\d+(\.\d+)?$")

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


def _pick(uri_value: Any, cfg_value: Any, default: Any) -> Any:
    if uri_value is not None:
        return uri_value
    if cfg_value is not None:
        return cfg_value
    return default


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
    max_batch_size: int = 16
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
        kc = config.sink.kafka_config
        cc = kc.codec_config

        raw_protocol = _pick(p.get_str("protocol"), config.sink.protocol, None)
        if not raw_protocol:
            raise SinkURIError(
                f"no protocol in sink URI {shown!r}: add ?protocol=canal-json (or avro), "
                "or set protocol under [sink] in the changefeed config"
            )
        protocol = normalize_protocol(raw_protocol)

        partition_num = _pick(p.get_int("partition-num"), kc.partition_num, None)
        if partition_num is not None and partition_num <= 0:
            raise SinkURIError(
                f"invalid partition num {partition_num} for 'partition-num': it must be > 0 "
                "(or leave it out to use the topic's own partition count)"
            )
        replication_factor = _pick(p.get_int("replication-factor"), kc.replication_factor, 1)
        if replication_factor <= 0:
            raise SinkURIError(
                f"invalid value {replication_factor} for 'replication-factor': it must be >= 1 "
                "and at most the number of brokers"
            )
        kafka_version = _pick(p.get_str("kafka-version"), kc.kafka_version, "2.4.0")
        if not _KAFKA_VERSION.match(kafka_version):
            raise SinkURIError(
                f"invalid value {kafka_version!r} for 'kafka-version': use a Kafka version like 2.4.0 or 3.6.1"
            )
        max_message_bytes = _pick(
            p.get_int("max-message-bytes"), kc.max_message_bytes, DEFAULT_MAX_MESSAGE_BYTES
        )
        if max_message_bytes <= 0:
            raise SinkURIError(
                f"invalid max-message-bytes {max_message_bytes}: it must be > 0 (default {DEFAULT_MAX_MESSAGE_BYTES})"
            )
        max_retry = p.get_int("max-retry", 5)
        assert max_retry is not None
        if max_retry < 0:
            raise SinkURIError(f"invalid value {max_retry} for 'max-retry': it must be >= 0")
        compression = str(_pick(p.get_str("compression"), kc.compression, "none")).strip().lower()
        if compression not in COMPRESSIONS:
            raise SinkURIError(
                f"invalid value {compression!r} for 'compression'; allowed: {', '.join(COMPRESSIONS)}"
            )
        client_id = _pick(p.get_str("kafka-client-id"), kc.kafka_client_id, "")
        if not client_id:
            client_id = _CLIENT_ID_INVALID.sub("_", f"sparkcdc_producer_default_{changefeed_id}")
        if not _CLIENT_ID.match(client_id):
            raise SinkURIError(
                f"invalid kafka client ID {client_id!r} for 'kafka-client-id': use only [A-Za-z0-9._-]"
            )
        auto_create = _pick(p.get_bool("auto-create-topic"), kc.auto_create_topic, True)
        dial_timeout = _duration(p, "dial-timeout", kc.dial_timeout, 10.0)
        read_timeout = _duration(p, "read-timeout", kc.read_timeout, 10.0)
        write_timeout = _duration(p, "write-timeout", kc.write_timeout, 10.0)
        message_timeout = _duration(p, "message-timeout", None, DEFAULT_MESSAGE_TIMEOUT)
        if message_timeout < 1.0:
            raise SinkURIError(
                f"invalid value {message_timeout}s for 'message-timeout': use at least 1s (default 5m)"
            )
        acks_raw = p.get("required-acks")
        if acks_raw is not None:
            try:
                required_acks = int(acks_raw)
            except ValueError:
                raise SinkURIError(
                    f"invalid required acks {acks_raw!r}, only support these values: 0, 1, -1"
                ) from None
        else:
            required_acks = kc.required_acks if kc.required_acks is not None else -1
        if required_acks not in REQUIRED_ACKS:
            raise SinkURIError(f"invalid required acks {required_acks}, only support these values: 0, 1, -1")

        sasl_user = _pick(p.get_str("sasl-user"), kc.sasl_user, "")
        sasl_password = _pick(p.get_str("sasl-password"), kc.sasl_password, "")
        mech_raw = _pick(p.get_str("sasl-mechanism"), kc.sasl_mechanism, "")
        sasl_mechanism = ""
        if mech_raw:
            sasl_mechanism = SASL_MECHANISMS.get(mech_raw.strip().lower(), "")
            if not sasl_mechanism:
                raise SinkURIError(
                    f"invalid value {mech_raw!r} for 'sasl-mechanism'; allowed: "
                    f"{', '.join(SASL_MECHANISMS.values())}"
                )
        gssapi = _gssapi(p, sasl_mechanism)
        if (sasl_user or sasl_password) and not sasl_mechanism:
            sasl_mechanism = "PLAIN"
        if sasl_mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") and not (
            sasl_user and sasl_password
        ):
            raise SinkURIError(
                f"sasl-mechanism {sasl_mechanism} needs both sasl-user and sasl-password in sink URI {shown!r}"
            )

        ca = _pick(p.get_str("ca"), kc.ca, "")
        cert = _pick(p.get_str("cert"), kc.cert, "")
        key = _pick(p.get_str("key"), kc.key, "")
        if (cert or key) and not ca:
            raise SinkURIError("ca, cert and key files should all be supplied (got cert/key without ca)")
        if bool(cert) != bool(key):
            raise SinkURIError("ca, cert and key files should all be supplied (cert and key go together)")
        tls_param = _pick(p.get_bool("enable-tls"), kc.enable_tls, None)
        if tls_param is False and ca:
            raise SinkURIError(
                "credential files are supplied, but 'enable-tls' is set to false; remove ca/cert/key or enable TLS"
            )
        if tls_param is False and p.scheme == "kafka+ssl":
            raise SinkURIError("the kafka+ssl:// scheme needs TLS, but 'enable-tls' is set to false")
        enable_tls = bool(tls_param) or bool(ca) or p.scheme == "kafka+ssl"
        insecure = _pick(p.get_bool("insecure-skip-verify"), kc.insecure_skip_verify, False)

        ext = _pick(p.get_bool("enable-tidb-extension"), cc.enable_tidb_extension, False)
        max_batch_size = _pick(p.get_int("max-batch-size"), cc.max_batch_size, 16)
        if max_batch_size <= 0:
            raise SinkURIError(f"invalid max-batch-size {max_batch_size}: it must be > 0 (default 16)")
        only_updated = p.get_bool("only-output-updated-columns")
        content_compatible = p.get_bool("content-compatible")
        atomicity = p.get_str("transaction-atomicity")
        for where, value in (("sink URI", atomicity), ("[sink] config", config.sink.transaction_atomicity)):
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

        large = LargeMessageOptions() if consumer else _large_message(config, protocol, ext)
        if large.option != "none" and config.force_replicate:
            raise ConfigError(
                f'force-replicate must be disabled, when the large message handle option is set to "{large.option}"'
            )
        return cls(
            brokers=brokers,
            topic=topic,
            protocol=protocol,
            partition_num=partition_num,
            replication_factor=replication_factor,
            kafka_version=kafka_version,
            max_message_bytes=max_message_bytes,
            max_retry=max_retry,
            compression=compression,
            client_id=client_id,
            auto_create_topic=auto_create,
            dial_timeout=dial_timeout,
            read_timeout=read_timeout,
            write_timeout=write_timeout,
            message_timeout=message_timeout,
            required_acks=required_acks,
            sasl_user=sasl_user,
            sasl_password=sasl_password,
            sasl_mechanism=sasl_mechanism,
            sasl_gssapi=gssapi,
            enable_tls=enable_tls,
            ca=ca,
            cert=cert,
            key=key,
            insecure_skip_verify=bool(insecure) and enable_tls,
            enable_tidb_extension=bool(ext),
            max_batch_size=max_batch_size,
            only_output_updated_columns=only_updated,
            content_compatible=content_compatible,
            output_raw_change_event=kc.output_raw_change_event,
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
            "socket.connection.setup.timeout.ms": max(1000, int(self.dial_timeout * 1000)),
            "socket.timeout.ms": max(10, int(max(self.read_timeout, self.write_timeout) * 1000)),
            # come back within ~2s once a broker is reachable again (librdkafka's default caps at 10s)
            "reconnect.backoff.ms": 100,
            "reconnect.backoff.max.ms": 2000,
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
        conf["message.max.bytes"] = min(1_000_000_000, max(1_000_000, self.max_message_bytes + 4096))
        conf["message.timeout.ms"] = int(self.message_timeout * 1000)
        conf["request.timeout.ms"] = max(1000, int(self.write_timeout * 1000))
        conf["linger.ms"] = 5
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


def _duration(p: ParsedURI, key: str, cfg_value: str | None, default: float) -> float:
    v = p.get_duration(key)
    if v is not None:
        return v
    if cfg_value:
        return parse_duration(cfg_value, f"sink.kafka-config.{key}")
    return default


def _gssapi(p: ParsedURI, mechanism: str) -> dict[str, str]:
    auth_type = p.get_str("sasl-gssapi-auth-type")
    keytab = p.get_str("sasl-gssapi-keytab-path")
    krb5 = p.get_str("sasl-gssapi-kerberos-config-path")
    service = p.get_str("sasl-gssapi-service-name")
    user = p.get_str("sasl-gssapi-user")
    password = p.get_str("sasl-gssapi-password")
    realm = p.get_str("sasl-gssapi-realm")
    pafxfast = p.get_bool("sasl-gssapi-disable-pafxfast")
    given = any(v is not None for v in (auth_type, keytab, krb5, service, user, password, realm, pafxfast))
    if not given:
        return {}
    if mechanism != "GSSAPI":
        raise SinkURIError("sasl-gssapi-* parameters need sasl-mechanism=GSSAPI")
    kind = (auth_type or "keytab").strip().lower()
    if kind not in ("keytab", "user"):
        raise SinkURIError(f"invalid value {auth_type!r} for 'sasl-gssapi-auth-type'; allowed: user, keytab")
    if kind == "user" or password:
        raise SinkURIError(
            "sasl-gssapi-auth-type=user (password login) is not supported by librdkafka: "
            "use sasl-gssapi-auth-type=keytab with sasl-gssapi-keytab-path"
        )
    if krb5:
        raise SinkURIError(
            "sasl-gssapi-kerberos-config-path is not supported by librdkafka: set KRB5_CONFIG in the "
            "environment of the sparkcdc processes instead"
        )
    if not keytab or not user:
        raise SinkURIError("GSSAPI with a keytab needs sasl-gssapi-keytab-path and sasl-gssapi-user")
    principal = f"{user}@{realm}" if realm else user
    conf = {
        "sasl.kerberos.keytab": keytab,
        "sasl.kerberos.principal": principal,
        "sasl.kerberos.service.name": service or "kafka",
    }
    return conf


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
        raise ConfigError(
            f"large-message-handle-compression = {compression!r} is not supported yet by sparkcdc; "
            'use "none" (Kafka\'s own compression setting still applies)'
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
