"""The Spark data plane: a binlog stream source, per-batch sink writes, and the changefeed job."""
