"""Local real services (MariaDB, Kafka, S3, PostgreSQL) for tests, demos and benchmarks."""
