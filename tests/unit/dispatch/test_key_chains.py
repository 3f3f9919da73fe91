"""Every change of a key goes to the key's partition, also when a transaction changes the key several times.

The Kafka sink splits a key-changing UPDATE (spec §7) into a DELETE of the old key and an INSERT of
the new one; the index-value rule hashes a DELETE by its old row and the rest by the new row, so
each key's changes share one partition. Without the split (``output-raw-change-event``) a
key-changing UPDATE goes to its new key's partition, as TiCDC's does.
"""

from __future__ import annotations

import random

from sparkcdc.codec.values import split_update_if_key_changed
from sparkcdc.config.replica import DispatchRule
from sparkcdc.dispatch.partition import PartitionDispatcher
from sparkcdc.model import RowChange, compose_ts
from tests.unit.key_chains import PK_TABLE, SCENARIOS, random_txn, start_replica

TS = compose_ts(1_700_000_000_000, 0)
PARTITIONS = 4


def test_split_changes_of_a_key_share_its_partition() -> None:
    d = PartitionDispatcher.from_rule(DispatchRule(matcher=["*.*"], partition="index-value"))
    upstream = start_replica()
    rng = random.Random(1)
    txns = [SCENARIOS[name](upstream, TS) for name in ("key_changed_twice", "swap")]
    for i in range(100):
        txns.append(random_txn(upstream, TS + i, rng, rng.randint(1, 10), keys=16))
        upstream.apply_all(txns[-1])
    partition_of: dict[int, int] = {}
    partitions_used: set[int] = set()
    for txn in txns:
        for row in txn:
            for part in split_update_if_key_changed(row, PK_TABLE):
                key = part.image[0]
                p = d.partition(part, PK_TABLE, PARTITIONS)
                assert partition_of.setdefault(key, p) == p, (
                    f"key {key} in partitions {partition_of[key]} and {p}"
                )
                partitions_used.add(p)
    assert len(partitions_used) > 1  # the keys spread: the check above is not trivially true


def test_a_raw_key_changing_update_goes_to_the_new_keys_partition() -> None:
    d = PartitionDispatcher.from_rule(DispatchRule(matcher=["*.*"], partition="index-value"))
    keys = range(64)
    by_key = {
        k: d.partition(RowChange("I", "s", "t", 1, TS, None, (k, "x")), PK_TABLE, PARTITIONS) for k in keys
    }
    old, new = next((a, b) for a in keys for b in keys if by_key[a] != by_key[b])
    update = RowChange("U", "s", "t", 1, TS, (old, "x"), (new, "x"))
    assert d.partition(update, PK_TABLE, PARTITIONS) == by_key[new]
    delete, insert = split_update_if_key_changed(update, PK_TABLE)
    assert d.partition(delete, PK_TABLE, PARTITIONS) == by_key[old]
    assert d.partition(insert, PK_TABLE, PARTITIONS) == by_key[new]
