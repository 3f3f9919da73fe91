"""The Kafka sink (canal-json, avro) on librdkafka; see ``sink.py`` for the per-batch flow.

- ``config.py``: the sink's options (``OPTIONS``, ``KafkaOptions``: URI over ``[sink.kafka-config]``);
- ``sink.py``: ``KafkaSink``, the driver side (topics, routing, DDL, watermark on commit);
- ``writer.py``: ``KafkaPartitionWriter``, the executor side (encode, produce, wait for acks);
- ``producer.py``: the shared librdkafka producer and per-writer delivery tracking;
- ``admin.py``: topic administration (partition counts, auto-creation, size limits);
- ``encoders.py``: a codec's encoder with what Kafka adds (DDL placement, large-message forms);
- ``large_message.py``: size accounting, handle-key-only and claim-check storage.
"""

from sparkcdc.sink.kafka.sink import KafkaSink
from sparkcdc.sink.kafka.writer import KafkaPartitionWriter, writer_group

__all__ = ["KafkaPartitionWriter", "KafkaSink", "writer_group"]
