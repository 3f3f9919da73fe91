"""Kafka sink URI and config validation, and the librdkafka mapping."""

from __future__ import annotations

import pickle

import pytest

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.errors import ConfigError, SinkURIError
from sparkcdc.sink.kafka import KafkaSink
from sparkcdc.sink.kafka.config import KafkaOptions
from sparkcdc.sink.kafka.encoders import KAFKA_PROTOCOLS, check_supported

BASE = "kafka://127.0.0.1:9092,127.0.0.2:9093/topic-a"


def parse(query: str, toml: str = "", base: str = BASE) -> KafkaOptions:
    return KafkaOptions.parse(f"{base}?{query}", ReplicaConfig.from_toml(toml), "cf-1")


def test_defaults() -> None:
    o = parse("protocol=canal-json")
    assert o.brokers == ("127.0.0.1:9092", "127.0.0.2:9093")
    assert o.topic == "topic-a"
    assert o.protocol == "canal-json"
    assert o.partition_num is None
    assert o.replication_factor == 1
    assert o.max_message_bytes == 10485760
    assert o.required_acks == -1
    assert o.compression == "none"
    assert o.auto_create_topic is True
    assert o.client_id == "sparkcdc_producer_default_cf-1"
    assert o.enable_tidb_extension is False
    assert o.dial_timeout == o.read_timeout == o.write_timeout == 10.0


def test_every_parameter_is_read() -> None:
    o = parse(
        "protocol=canal-json&partition-num=6&replication-factor=2&kafka-version=3.6.1&max-message-bytes=4096"
        "&max-retry=3&compression=ZSTD&kafka-client-id=my.client&auto-create-topic=false&dial-timeout=3s"
        "&read-timeout=1m&write-timeout=1500ms&required-acks=1&sasl-user=u&sasl-password=p"
        "&sasl-mechanism=scram-sha-512&enable-tidb-extension=true&max-batch-size=1"
        "&only-output-updated-columns=true&content-compatible=false&transaction-atomicity=none"
    )
    assert (o.partition_num, o.replication_factor, o.kafka_version) == (6, 2, "3.6.1")
    assert (o.max_message_bytes, o.max_retry, o.compression) == (4096, 3, "zstd")
    assert (o.client_id, o.auto_create_topic, o.required_acks) == ("my.client", False, 1)
    assert (o.dial_timeout, o.read_timeout, o.write_timeout) == (3.0, 60.0, 1.5)
    assert (o.sasl_user, o.sasl_password, o.sasl_mechanism) == ("u", "p", "SCRAM-SHA-512")
    assert o.enable_tidb_extension
    assert o.only_output_updated_columns is True and o.content_compatible is False
    conf = o.producer_config()
    assert conf["acks"] == "1"
    assert conf["compression.type"] == "zstd"
    assert conf["client.id"] == "my.client"
    assert conf["security.protocol"] == "SASL_PLAINTEXT"
    assert conf["sasl.mechanism"] == "SCRAM-SHA-512"
    assert conf["sasl.username"] == "u" and conf["sasl.password"] == "p"
    assert conf["socket.connection.setup.timeout.ms"] == 3000
    assert conf["broker.version.fallback"] == "3.6.1"  # kafka-version
    # acks=1: no idempotence, so one request in flight keeps each partition's order across retries
    assert conf["enable.idempotence"] is False and conf["max.in.flight.requests.per.connection"] == 1
    assert conf["retries"] == 3


def test_acks_all_uses_idempotence_and_fits_max_message_bytes() -> None:
    conf = parse("protocol=canal-json&max-message-bytes=20000000").producer_config()
    assert conf["acks"] == "all"
    assert conf["enable.idempotence"] is True
    assert conf["message.max.bytes"] >= 20000000


def test_kafka_config_section_and_uri_wins() -> None:
    toml = (
        '[sink.kafka-config]\npartition-num = 7\ncompression = "lz4"\nmax-message-bytes = 1000\n'
        "[sink.kafka-config.codec-config]\nenable-tidb-extension = true\n"
    )
    o = parse("protocol=canal-json&compression=gzip", toml)
    assert (o.partition_num, o.compression, o.max_message_bytes) == (7, "gzip", 1000)
    assert o.enable_tidb_extension is True


def test_protocol_from_config_and_aliases() -> None:
    assert parse("", '[sink]\nprotocol = "canal-json"\n').protocol == "canal-json"
    assert parse("protocol=flat-avro&schema-registry=http://r:8081").protocol == "avro"
    assert parse("protocol=default").protocol == "open-protocol"


def test_tls() -> None:
    o = parse("protocol=canal-json&ca=/ca.pem&cert=/c.pem&key=/k.pem&insecure-skip-verify=true")
    conf = o.common_config()
    assert conf["security.protocol"] == "SSL"
    assert conf["ssl.ca.location"] == "/ca.pem" and conf["ssl.key.location"] == "/k.pem"
    assert conf["enable.ssl.certificate.verification"] is False
    ssl = parse("protocol=canal-json", base="kafka+ssl://h:9093/t").common_config()
    assert ssl["security.protocol"] == "SSL"
    sasl_ssl = parse("protocol=canal-json&enable-tls=true&sasl-user=a&sasl-password=b").common_config()
    assert sasl_ssl["security.protocol"] == "SASL_SSL" and sasl_ssl["sasl.mechanism"] == "PLAIN"


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("", "no protocol in sink URI"),
        ("protocol=json", "unknown protocol 'json' in the sink URI"),
        ("protocol=canal-json&partition-num=0", "invalid partition-num 0 in the sink URI"),
        (
            "protocol=canal-json&partition-num=x",
            "invalid partition-num 'x' in the sink URI: expected an integer",
        ),
        ("protocol=canal-json&replication-factor=0", "invalid replication-factor 0 in the sink URI"),
        ("protocol=canal-json&max-message-bytes=0", "invalid max-message-bytes 0"),
        ("protocol=canal-json&max-batch-size=0", "invalid max-batch-size 0"),
        (
            "protocol=canal-json&compression=brotli",
            "invalid compression 'brotli' in the sink URI: expected one of: none, gzip",
        ),
        (
            "protocol=canal-json&required-acks=2",
            "invalid required-acks 2 in the sink URI: expected one of: -1, 0, 1",
        ),
        ("protocol=canal-json&kafka-client-id=a%3Ab", "invalid kafka-client-id 'a:b' in the sink URI"),
        ("protocol=canal-json&kafka-version=latest", "invalid kafka-version 'latest' in the sink URI"),
        ("protocol=canal-json&dial-timeout=10", "invalid dial-timeout '10' in the sink URI"),
        ("protocol=canal-json&auto-create-topic=yes", "expected true or false"),
        ("protocol=canal-json&sasl-mechanism=NTLM", "invalid sasl-mechanism 'NTLM' in the sink URI"),
        ("protocol=canal-json&sasl-mechanism=PLAIN&sasl-user=u", "needs both sasl-user and sasl-password"),
        ("protocol=canal-json&cert=/c&key=/k", "ca, cert and key files should all be supplied"),
        (
            "protocol=canal-json&ca=/ca&enable-tls=false",
            "credential files are supplied, but 'enable-tls' is set to false",
        ),
        ("protocol=canal-json&transaction-atomicity=table", "the Kafka sink only supports 'none'"),
        ("protocol=canal-json&schema-registry=http://r", "'schema-registry' only applies to protocol avro"),
        ("protocol=canal-json&bogus=1", "unknown sink URI parameter(s) 'bogus'"),
        ("protocol=canal-json&sasl-gssapi-user=u", "sasl-gssapi-* parameters need sasl-mechanism=GSSAPI"),
    ],
)
def test_bad_uri_parameters(query: str, message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse(query)
    assert message in str(exc.value)


def test_missing_and_invalid_topic() -> None:
    with pytest.raises(SinkURIError, match="no topic is specified in sink-uri"):
        KafkaOptions.parse("kafka://h:9092/?protocol=canal-json", ReplicaConfig())
    with pytest.raises(SinkURIError, match="invalid topic name 'a b'"):
        KafkaOptions.parse("kafka://h:9092/a%20b?protocol=canal-json", ReplicaConfig())
    with pytest.raises(SinkURIError, match="no Kafka broker"):
        KafkaOptions.parse("kafka:///t?protocol=canal-json", ReplicaConfig())


def test_transaction_atomicity_from_config_is_refused() -> None:
    with pytest.raises(ConfigError, match="the Kafka sink only supports 'none'"):
        parse("protocol=canal-json", '[sink]\ntransaction-atomicity = "table"\n')


def test_password_is_redacted_in_errors() -> None:
    with pytest.raises(ConfigError) as exc:
        parse("protocol=canal-json&sasl-password=hunter2&nope=1")
    assert "hunter2" not in str(exc.value)


def test_unsupported_protocols_name_the_supported_ones() -> None:
    assert sorted(KAFKA_PROTOCOLS) == ["avro", "canal-json"]
    with pytest.raises(SinkURIError) as exc:
        KafkaSink(f"{BASE}?protocol=maxwell", ReplicaConfig())
    assert "protocol 'maxwell' is accepted by TiCDC, not supported by sparkcdc" in str(exc.value)
    assert "use one of: avro, canal-json" in str(exc.value)
    with pytest.raises(SinkURIError, match="use one of: avro, canal-json"):
        check_supported("open-protocol")


LMH = "[sink.kafka-config.large-message-handle]\n"


def test_large_message_options() -> None:
    o = parse(
        "protocol=canal-json&enable-tidb-extension=true",
        LMH + 'large-message-handle-option = "handle-key-only"\n',
    )
    assert o.large_message.handle_key_only
    with pytest.raises(ConfigError) as exc:
        parse("protocol=canal-json", LMH + 'large-message-handle-option = "handle-key-only"\n')
    assert (
        "large message handle is set to handle-key-only, protocol is canal-json, but enable-tidb-extension is false"
        in str(exc.value)
    )
    with pytest.raises(ConfigError) as exc:
        parse(
            "protocol=canal-json&enable-tidb-extension=true",
            LMH + 'large-message-handle-option = "claim-check"\n',
        )
    assert "large message handle is set to claim-check, but the claim-check-storage-uri is empty" in str(
        exc.value
    )
    with pytest.raises(ConfigError, match="allowed: none, handle-key-only, claim-check"):
        parse("protocol=canal-json", LMH + 'large-message-handle-option = "drop"\n')
    with pytest.raises(ConfigError, match="it's not supported"):
        parse(
            "protocol=avro&schema-registry=http://r:1",
            LMH + 'large-message-handle-option = "handle-key-only"\n',
        )
    with pytest.raises(ConfigError, match="force-replicate must be disabled"):
        parse(
            "protocol=canal-json&enable-tidb-extension=true",
            "force-replicate = true\n" + LMH + 'large-message-handle-option = "handle-key-only"\n',
        )


def test_sink_is_picklable_and_routes_without_a_broker() -> None:
    sink = KafkaSink(f"{BASE}?protocol=canal-json&partition-num=3", ReplicaConfig(), "cf")
    sink.partitions["topic-a"] = 3  # as check() would have found
    clone = pickle.loads(pickle.dumps(sink))
    assert clone.options == sink.options and clone.num_writers == 3
    from sparkcdc.model import ColumnInfo, IndexInfo, RowChange, TableInfo

    table = TableInfo("db", "t", (ColumnInfo("id", "int"),), (IndexInfo("PRIMARY", ("id",), True, True),))
    rows = [RowChange("I", "db", "t", 0, i, None, (i,)) for i in range(10)]
    groups = {clone.route(r, table) for r in rows}
    assert len(groups) == 1  # default dispatch = by table: one partition, one writer group
