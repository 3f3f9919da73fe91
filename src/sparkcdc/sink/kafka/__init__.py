"""The Kafka sink (canal-json, avro) on librdkafka; see ``sink.py`` for the per-batch flow."""

from sparkcdc.sink.kafka.sink import KafkaPartitionWriter, KafkaSink, writer_group

__all__ = ["KafkaPartitionWriter", "KafkaSink", "writer_group"]
