"""aiokafka's offset lookups (ListOffsets, which it speaks at v1–v3) against both brokers: beginning and end
offsets at both isolation levels while a transaction is open (read_committed ends at the last stable offset),
seek_to_beginning / seek_to_end, and offsets_for_times before, inside and after the log's timestamps."""

import asyncio
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

COMMITTED = 10  # plain records in partition 0, timestamps BASE, BASE + STEP, ...
OPEN = 3  # records of a transaction left open, then committed
STEP_MS = 1000


async def consumer(bootstrap, isolation):
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False)
    await c.start()
    return c


async def lookups(c, tp0, tp1, base):
    """What one consumer's offset lookups answer."""
    c.assign([tp0, tp1])
    # assign() starts a reset to the latest offset (auto_offset_reset) in the background; waiting for it first
    # keeps it from racing the seeks below (aiokafka 0.14 can lose a seek_to_beginning issued while it runs).
    found = {"position after assign": await c.position(tp0)}
    found["beginning"] = await c.beginning_offsets([tp0, tp1])
    found["end"] = await c.end_offsets([tp0, tp1])
    await c.seek_to_beginning(tp0)
    found["position after seek_to_beginning"] = await c.position(tp0)
    await c.seek_to_end(tp0)
    found["position after seek_to_end"] = await c.position(tp0)
    times = await c.offsets_for_times(
        {tp0: base + 4 * STEP_MS + STEP_MS // 2, tp1: base}  # between records 4 and 5; an empty partition
    )
    found["time inside"] = {tp: (t.offset, t.timestamp) if t else None for tp, t in times.items()}
    # After every plain record: only the open transaction's records (stamped now) are later.
    after = await c.offsets_for_times({tp0: base + (COMMITTED + 5) * STEP_MS})
    found["time after"] = {tp: t.offset if t else None for tp, t in after.items()}
    return found


async def settled_end(c, tp, limit_s=10.0):
    """The end offset once it stops moving (Kafka writes the commit marker after EndTxn answers)."""
    deadline = time.monotonic() + limit_s
    last = None
    while time.monotonic() < deadline:
        end = (await c.end_offsets([tp]))[tp]
        if end == last:
            break
        last = end
        await asyncio.sleep(0.2)
    return last


async def scenario(bootstrap, topic, transactional_id):
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    base = int(time.time() * 1000) - 600_000  # ten minutes ago: earlier than anything else in the log
    plain = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
    transactional = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id)
    await plain.start()
    await transactional.start()
    try:
        for i in range(COMMITTED):
            await plain.send_and_wait(topic, b"plain-%d" % i, partition=0, timestamp_ms=base + i * STEP_MS)
        await transactional.begin_transaction()
        for i in range(OPEN):
            await transactional.send_and_wait(topic, b"open-%d" % i, partition=0)

        readers = {level: await consumer(bootstrap, level) for level in ("read_committed", "read_uncommitted")}
        try:
            while_open = {isolation: await lookups(c, tp0, tp1, base) for isolation, c in readers.items()}
            await transactional.commit_transaction()
            after_commit = {isolation: await settled_end(c, tp0) for isolation, c in readers.items()}
        finally:
            for c in readers.values():
                await c.stop()
    finally:
        await transactional.stop()
        await plain.stop()
    return tp0, tp1, base, while_open, after_commit


def test_list_offsets_at_both_isolation_levels(broker):
    topic = broker.create_topic(2, "offsets")
    tp0, tp1, base, while_open, after_commit = asyncio.run(
        asyncio.wait_for(scenario(broker.bootstrap, topic, broker.unique("offsets-txn")), 90)
    )
    # The open transaction holds the last stable offset at COMMITTED; the high watermark is past its records.
    last_stable, high_watermark = COMMITTED, COMMITTED + OPEN
    for isolation, end in (("read_committed", last_stable), ("read_uncommitted", high_watermark)):
        found = while_open[isolation]
        assert found["beginning"] == {tp0: 0, tp1: 0}, isolation
        assert found["end"] == {tp0: end, tp1: 0}, isolation
        assert found["position after assign"] == end, isolation  # auto_offset_reset="latest"
        assert found["position after seek_to_beginning"] == 0, isolation
        assert found["position after seek_to_end"] == end, isolation
        # The first record at or after a time between records 4 and 5 is record 5; an empty partition has none.
        assert found["time inside"] == {tp0: (5, base + 5 * STEP_MS), tp1: None}, isolation
    # After every plain record comes only the open transaction, which read_committed may not see yet.
    assert while_open["read_committed"]["time after"] == {tp0: None}
    assert while_open["read_uncommitted"]["time after"] == {tp0: COMMITTED}
    # The commit marker takes an offset too; both levels end after it.
    assert after_commit == {isolation: high_watermark + 1 for isolation in after_commit}
