"""kill -9 mid-stream, restart on the same directory and port: every acknowledged message is there, and the
idempotent producer continues without duplicates (producer state recovered from the log dedupes its retries)."""

import threading
import time

from confluent_kafka import Consumer, TopicPartition

from conftest import drain_confluent, idempotent_producer

MESSAGES = 20_000


def test_acknowledged_data_survives_kill_9_and_the_producer_continues_without_duplicates(serve):
    broker = serve("--topic", "stream:2")
    producer = idempotent_producer(broker.bootstrap, reconnect_backoff_max_ms=500)
    acked, failed = set(), []

    def delivered(error, message):
        if error:
            failed.append(error)
        else:
            acked.add(message.value())

    killed = threading.Event()

    def killer():
        while len(acked) < MESSAGES // 4:
            time.sleep(0.01)
        broker.kill()
        time.sleep(1.0)
        broker.restart()
        killed.set()

    thread = threading.Thread(target=killer)
    thread.start()
    for i in range(MESSAGES):
        producer.produce("stream", value=b"%05d" % i, partition=i % 2, on_delivery=delivered)
        producer.poll(0)
        if i % 1000 == 0:
            time.sleep(0.05)  # keep the stream going while the broker is killed and restarted
    assert producer.flush(120) == 0
    thread.join()
    assert killed.is_set()
    assert failed == []
    assert len(acked) == MESSAGES

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "check", "enable.auto.commit": False})
    consumer.assign([TopicPartition("stream", p, 0) for p in range(2)])
    stored = drain_confluent(consumer)
    consumer.close()
    values = [value for _, _, value in stored]
    assert len(values) == len(set(values)), "duplicates after the restart"
    assert set(values) == acked
    for partition in range(2):
        in_partition = [int(v) for p, _, v in stored if p == partition]
        assert in_partition == sorted(in_partition), "reordered"
