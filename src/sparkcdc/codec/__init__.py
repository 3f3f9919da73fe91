"""Codecs with TiCDC's exact output formats, each encoder beside its decoder.

- ``canal_json``: canal-json messages (Kafka and storage sinks);
- ``csv``: storage-sink CSV records;
- ``values``: shared value renderers (Go float formatting, canal strings, split UPDATE);
- ``canal_types``: canal ``sqlType``/``mysqlType`` facts.
"""
