"""Codecs with TiCDC's exact output formats, each encoder beside its decoder.

- ``base``: the contract every encoder keeps (``Encoder``: per-table value encoder, messages,
  DDL and watermark) and ``build_encoder(protocol, config, options)``, the one factory sinks use;
- ``canal_json``: canal-json messages (Kafka and storage sinks);
- ``csv``: storage-sink CSV records; ``csv_kinds``: how each kind of column is rendered
  (the encoder's formatter and the upstream's SQL);
- ``values``: shared value renderers (Go float formatting, canal strings, split UPDATE);
- ``canal_types``: canal ``sqlType``/``mysqlType`` facts;
- ``avro``, ``avro_schema``: Avro with the Confluent wire format;
- ``csv_sql``: the CSV records rendered by the upstream for the snapshot.

May import: ``errors``, ``model``, ``config`` and ``capture`` (value types of decoded rows); never
sink, pipeline, server or cli.
"""
