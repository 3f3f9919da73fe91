"""Local real services (MariaDB, Kafka, S3, PostgreSQL) for tests, demos and benchmarks.

Launchers that start a real server on 127.0.0.1 with free ports and stop it: MariaDB, Tansu (Kafka),
moto (S3), PostgreSQL, the schema registry, and a Spark standalone cluster whose workers each have a
private /tmp (``spark_cluster``). Imports nothing from the data path.
"""
