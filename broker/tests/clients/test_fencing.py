"""Zombie fencing: a second producer with the same transactional.id fences the first (against both brokers)."""

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from conftest import drain_confluent


def test_second_producer_fences_the_first(broker):
    ledger = broker.create_topic(1, "ledger")
    config = {"bootstrap.servers": broker.bootstrap, "transactional.id": broker.unique("ledger-writer")}
    zombie = Producer(config)
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(ledger, value=b"zombie-before-fence")
    assert zombie.flush(30) == 0

    successor = Producer(config)
    successor.init_transactions(30)  # bumps the epoch and aborts the zombie's open transaction
    successor.begin_transaction()
    successor.produce(ledger, value=b"successor")
    successor.commit_transaction(30)

    with pytest.raises(KafkaException) as raised:
        zombie.produce(ledger, value=b"zombie-after-fence")
        zombie.flush(10)
        zombie.commit_transaction(30)
    error = raised.value.args[0]
    assert error.fatal(), f"expected a fatal (fenced) error, got {error}"

    reader = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": broker.unique("audit"),
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    reader.assign([TopicPartition(ledger, 0, 0)])
    assert [value for _, _, value in drain_confluent(reader)] == [b"successor"]
    reader.close()
