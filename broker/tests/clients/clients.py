"""The six clients of the suite behind one interface, so that every scenario runs the same way with each:

    produce_idempotent(bootstrap, topic, partitions, count)
        -> [(partition, offset, value)], value "idempotent-<i>" to partition i % partitions
    produce_transactional(bootstrap, topic, partitions, transactional_id, plan)
        -> [(outcome, [(partition, offset, value)])], one per (outcome, count) step of `plan`; transaction n's
           values are "txn<n>-<outcome>-<i>", to partition i % partitions, all acknowledged before it ends
    consume(bootstrap, topic, partitions, isolation, expected)
        -> [(partition, offset, value)] from offset 0 of every partition, assigned (no group); read until
           `expected` records have arrived and then nothing more for a second, or 30 s

librdkafka, kafka-python and aiokafka run in this process; kafkajs, the Java client and franz-go are programs
(programs.py) with the same three scenarios as commands. kafkajs has no consumer without group membership
(`consume` is None); `consume_group` (kafkajs and Java) reads as a member of a group (test_groups.py).
"""

from __future__ import annotations

import asyncio
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition

STEP_TIMEOUT_S = 30.0
IDLE_AFTER_EXPECTED_S = 1.0


def idempotent_values(count, partitions):
    return [(i % partitions, f"idempotent-{i}") for i in range(count)]


def transaction_values(n, outcome, count, partitions):
    return [(i % partitions, f"txn{n}-{outcome}-{i}") for i in range(count)]


def read_until(poll, expected, limit_s=STEP_TIMEOUT_S):
    """Calls `poll(timeout_s)` (which returns a list of records) until `expected` records have arrived and a
    poll of IDLE_AFTER_EXPECTED_S brings no more, or until `limit_s`."""
    records = []
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        satisfied = len(records) >= expected
        batch = poll(IDLE_AFTER_EXPECTED_S if satisfied else 0.5)
        records.extend(batch)
        if satisfied and not batch:
            break
    return records


# -- librdkafka (confluent-kafka) ------------------------------------------------------------------------------


class Librdkafka:
    name = "librdkafka"

    @staticmethod
    def _produce(producer, topic, values):
        """Produces (partition, value) pairs, flushes, returns [(partition, offset, value)] from the delivery
        reports."""
        delivered, failed = [], []

        def on_delivery(error, message):
            if error:
                failed.append(error)
            else:
                delivered.append((message.partition(), message.offset(), message.value().decode()))

        for partition, value in values:
            producer.produce(topic, value=value.encode(), partition=partition, on_delivery=on_delivery)
        assert producer.flush(STEP_TIMEOUT_S) == 0, "librdkafka: records left unacknowledged"
        assert failed == [], f"librdkafka: delivery failed: {failed}"
        return delivered

    @staticmethod
    def _config(bootstrap):
        return {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5}

    def produce_idempotent(self, bootstrap, topic, partitions, count):
        return self._produce(Producer(self._config(bootstrap)), topic, idempotent_values(count, partitions))

    def produce_transactional(self, bootstrap, topic, partitions, transactional_id, plan):
        producer = Producer({**self._config(bootstrap), "transactional.id": transactional_id})
        producer.init_transactions(STEP_TIMEOUT_S)
        done = []
        for n, (outcome, count) in enumerate(plan):
            producer.begin_transaction()
            # The flush in _produce delivers the records before an abort (librdkafka purges unsent ones).
            records = self._produce(producer, topic, transaction_values(n, outcome, count, partitions))
            if outcome == "commit":
                producer.commit_transaction(STEP_TIMEOUT_S)
            else:
                producer.abort_transaction(STEP_TIMEOUT_S)
            done.append((outcome, records))
        return done

    def consume(self, bootstrap, topic, partitions, isolation, expected):
        # confluent-kafka refuses a consumer without group.id; assign() with explicit offsets uses no group API.
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"{topic}-{isolation}",
                "isolation.level": isolation,
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 200,
            }
        )
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])

        def poll(timeout_s):
            batch = consumer.consume(1000, timeout_s)
            for message in batch:
                assert message.error() is None, f"librdkafka consumer: {message.error()}"
            return [(m.partition(), m.offset(), m.value().decode()) for m in batch]

        try:
            return read_until(poll, expected)
        finally:
            consumer.close()


# -- kafka-python ----------------------------------------------------------------------------------------------


class KafkaPython:
    name = "kafka-python"

    @staticmethod
    def _produce(producer, topic, values):
        futures = [(producer.send(topic, value.encode(), partition=partition), value) for partition, value in values]
        producer.flush(STEP_TIMEOUT_S)
        records = []
        for future, value in futures:
            metadata = future.get(STEP_TIMEOUT_S)
            records.append((metadata.partition, metadata.offset, value))
        return records

    @staticmethod
    def _config(bootstrap):
        return {"bootstrap_servers": bootstrap, "enable_idempotence": True, "acks": "all", "linger_ms": 5}

    def produce_idempotent(self, bootstrap, topic, partitions, count):
        producer = KafkaProducer(**self._config(bootstrap))
        try:
            return self._produce(producer, topic, idempotent_values(count, partitions))
        finally:
            producer.close(STEP_TIMEOUT_S)

    def produce_transactional(self, bootstrap, topic, partitions, transactional_id, plan):
        producer = KafkaProducer(**self._config(bootstrap), transactional_id=transactional_id)
        try:
            producer.init_transactions()
            done = []
            for n, (outcome, count) in enumerate(plan):
                producer.begin_transaction()
                records = self._produce(producer, topic, transaction_values(n, outcome, count, partitions))
                if outcome == "commit":
                    producer.commit_transaction()
                else:
                    producer.abort_transaction()
                done.append((outcome, records))
            return done
        finally:
            producer.close(STEP_TIMEOUT_S)

    def consume(self, bootstrap, topic, partitions, isolation, expected):
        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False, fetch_max_wait_ms=200
        )
        consumer.assign([KafkaTopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()

        def poll(timeout_s):
            batches = consumer.poll(timeout_ms=int(timeout_s * 1000))
            return [(m.partition, m.offset, m.value.decode()) for messages in batches.values() for m in messages]

        try:
            return read_until(poll, expected)
        finally:
            consumer.close()


# -- aiokafka --------------------------------------------------------------------------------------------------


def run_async(coroutine, limit_s=3 * STEP_TIMEOUT_S):
    return asyncio.run(asyncio.wait_for(coroutine, limit_s))


class Aiokafka:
    name = "aiokafka"

    @staticmethod
    async def _produce(producer, topic, values):
        futures = [await producer.send(topic, value.encode(), partition=partition) for partition, value in values]
        metadata = await asyncio.gather(*futures)
        return [(m.partition, m.offset, value) for m, (_, value) in zip(metadata, values)]

    @staticmethod
    def _producer(bootstrap, **extra):
        return AIOKafkaProducer(
            bootstrap_servers=bootstrap, enable_idempotence=True, acks="all", linger_ms=5, **extra
        )

    def produce_idempotent(self, bootstrap, topic, partitions, count):
        async def scenario():
            producer = self._producer(bootstrap)
            await producer.start()
            try:
                return await self._produce(producer, topic, idempotent_values(count, partitions))
            finally:
                await producer.stop()

        return run_async(scenario())

    def produce_transactional(self, bootstrap, topic, partitions, transactional_id, plan):
        async def scenario():
            producer = self._producer(bootstrap, transactional_id=transactional_id)
            await producer.start()  # InitProducerId
            done = []
            try:
                for n, (outcome, count) in enumerate(plan):
                    await producer.begin_transaction()
                    records = await self._produce(producer, topic, transaction_values(n, outcome, count, partitions))
                    if outcome == "commit":
                        await producer.commit_transaction()
                    else:
                        await producer.abort_transaction()
                    done.append((outcome, records))
                return done
            finally:
                await producer.stop()

        return run_async(scenario())

    def consume(self, bootstrap, topic, partitions, isolation, expected):
        async def scenario():
            consumer = AIOKafkaConsumer(
                bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False, fetch_max_wait_ms=200
            )
            await consumer.start()
            try:
                consumer.assign([AioTopicPartition(topic, p) for p in range(partitions)])
                await consumer.seek_to_beginning()
                records = []
                deadline = time.monotonic() + STEP_TIMEOUT_S
                while time.monotonic() < deadline:
                    satisfied = len(records) >= expected
                    wait_s = IDLE_AFTER_EXPECTED_S if satisfied else 0.5
                    batches = await consumer.getmany(timeout_ms=int(wait_s * 1000))
                    batch = [(m.partition, m.offset, m.value.decode()) for ms in batches.values() for m in ms]
                    records.extend(batch)
                    if satisfied and not batch:
                        break
                return records
            finally:
                await consumer.stop()

        return run_async(scenario())


# -- the programs: kafkajs, the Java client, franz-go ----------------------------------------------------------


class ProgramClient:
    """A client program from programs.py; `consume` is None when it has no group-less consumer."""

    def __init__(self, program, has_consumer=True):
        self.program = program
        self.name = program.name
        if not has_consumer:
            self.consume = None

    @staticmethod
    def _records(rows):
        return [(partition, offset, value) for partition, offset, value in rows]

    def produce_idempotent(self, bootstrap, topic, partitions, count):
        return self._records(self.program.run("produce-idempotent", bootstrap, topic, partitions, count)["records"])

    def produce_transactional(self, bootstrap, topic, partitions, transactional_id, plan):
        steps = ",".join(f"{outcome}:{count}" for outcome, count in plan)
        result = self.program.run("produce-transactional", bootstrap, topic, partitions, transactional_id, steps)
        return [(t["outcome"], self._records(t["records"])) for t in result["transactions"]]

    def consume(self, bootstrap, topic, partitions, isolation, expected):
        result = self.program.run("consume", bootstrap, topic, partitions, isolation, expected)
        return self._records(result["records"])

    def transform(self, bootstrap, topic, partitions, group, output, transactional_id, count):
        """Exactly once: COUNT records of `topic` copied to `output` by a member of GROUP, offsets in the
        transactions (Java only); the input records it read."""
        result = self.program.run("transform", bootstrap, topic, partitions, group, output, transactional_id, count)
        return self._records(result["records"])

    def consume_group(self, bootstrap, topic, partitions, group, count):
        """COUNT records read as a member of GROUP (from its committed offsets), which it leaves after."""
        return self._records(self.program.run("consume-group", bootstrap, topic, partitions, group, count)["records"])
