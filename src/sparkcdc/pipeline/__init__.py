"""The Spark data plane: a binlog stream source, per-batch sink writes, and the changefeed job.

Owns the ``sparkcdc_binlog`` streaming source and its batch planner, the ``foreachBatch`` writer, the
changefeed lifecycle, the initial snapshot, and the data dir (``state.py``). May import every lower
layer (model, config, capture, codec, dispatch, sink) and ``meta`` (snapshot range progress under a
server); never server or cli.
"""
