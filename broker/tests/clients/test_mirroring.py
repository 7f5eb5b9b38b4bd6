"""Mirroring between two `mirrorlog serve` processes over the Kafka protocol, administered with `mirrorlog mirror`
as a user would (issue 35): librdkafka producers write to the source A (idempotent, and transactional with
commits, aborts and a transaction still open at the failover); the destination B mirrors A's topic batch for
batch; consumers on B read A's committed records at A's offsets; a failover cuts B to the last stable offset,
writes the MIRROR_PID_RESET barrier and opens the topic to B's own producers. Also: a destination killed with
SIGKILL while mirroring resumes and fails over once, and one killed in the middle of STOPPING completes it once
after a restart; a failover under transactional load; a source that goes away is retried; `promote` waits for the
lag; a failback mirrors the topic back into A; a chain A → B → C fails over in the middle and then at its end; two
sources fan in to one destination; a link through a TCP proxy that stalls and cuts its connections catches up
byte for byte."""

import json
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from conftest import drain_confluent, idempotent_producer

TOPIC = "orders"
PARTITIONS = 3


# -- helpers -------------------------------------------------------------------------------------------------------


def mirrorlog(*args, timeout=120):
    """Runs the mirrorlog binary: (exit code, stdout, stderr)."""
    done = subprocess.run([os.environ["MIRRORLOG_BIN"], *args], capture_output=True, timeout=timeout, text=True)
    return done.returncode, done.stdout, done.stderr


def mirror(action, dest, *args, expect_ok=True):
    """`mirrorlog mirror ACTION --bootstrap DEST ... --json`: the answer, checked against the exit status."""
    code, out, err = mirrorlog("mirror", action, "--bootstrap", dest.bootstrap, *args, "--json")
    answer = json.loads(out) if out.strip() else None
    if expect_ok:
        assert code == 0, f"mirror {action} failed ({code}): {err}\n{out}"
        assert answer["ok"], answer
    return code, answer, err


def partitions_of(answer):
    return [partition for link in answer["links"] for partition in link["partitions"]]


def wait_caught_up(dest, link, timeout_s=90):
    """Describes the link until every partition is MIRRORING with no lag behind the source's LSO, twice in a row
    at the same log ends. Lag is measured against the last answer that landed: a round fetched just before the
    source's last writes lands with lag 0 and the rounds after it bring the rest, so one describe alone can
    catch the mirror between two rounds."""
    deadline = time.monotonic() + timeout_s
    previous = None
    while True:
        _, answer, _ = mirror("describe", dest, "--link", link)
        partitions = partitions_of(answer)
        caught_up = all(p["state"] == "MIRRORING" and p["lag_offsets"] == 0 for p in partitions)
        ends = [p["log_end_offset"] for p in partitions] if caught_up else None
        if caught_up and ends == previous:
            return partitions
        previous = ends
        assert time.monotonic() < deadline, f"not caught up: {partitions}"
        time.sleep(0.2)


def read_all(bootstrap, isolation="read_committed", topic=TOPIC, partitions=PARTITIONS):
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "mirror-check",
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    records = drain_confluent(consumer, idle_s=2.0)
    consumer.close()
    return sorted(records)


def batches(broker, partition, topic=TOPIC):
    """Every batch of a partition directory, as `mirrorlog dump --json` decodes it (read-only)."""
    code, out, err = mirrorlog("dump", "--json", f"{broker.data_dir}/{topic}-{partition}")
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def barriers(records):
    return [b for b in records if b["attributes"]["is_control"] and b["records"] and b["records"][0].get("key") == "00000007"]


def transactional_producer(bootstrap, transactional_id):
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 60_000,
        }
    )
    producer.init_transactions(30)
    return producer


def write_source(bootstrap):
    """Idempotent records, a committed and an aborted transaction, and a transaction left open: what each
    read_committed consumer must see of it, and the still-open producer."""
    plain = idempotent_producer(bootstrap)
    for i in range(300):
        plain.produce(TOPIC, value=b"plain-%03d" % i, partition=i % PARTITIONS)
    assert plain.flush(60) == 0
    committed = transactional_producer(bootstrap, "committer")
    committed.begin_transaction()
    for i in range(90):
        committed.produce(TOPIC, value=b"committed-%03d" % i, partition=i % PARTITIONS)
    committed.commit_transaction(30)
    aborted = transactional_producer(bootstrap, "aborter")
    aborted.begin_transaction()
    for i in range(30):
        aborted.produce(TOPIC, value=b"aborted-%03d" % i, partition=i % PARTITIONS)
    aborted.flush(30)
    aborted.abort_transaction(30)
    left_open = transactional_producer(bootstrap, "left-open")
    left_open.begin_transaction()
    for i in range(15):
        left_open.produce(TOPIC, value=b"open-%03d" % i, partition=i % PARTITIONS)
    assert left_open.flush(30) == 0
    for i in range(30):
        plain.produce(TOPIC, value=b"after-open-%03d" % i, partition=i % PARTITIONS)
    assert plain.flush(60) == 0
    return left_open


def clusters(serve, topic_partitions=PARTITIONS):
    source = serve("--cluster-id", "cluster-a", "--topic", f"{TOPIC}:{topic_partitions}")
    dest = serve("--cluster-id", "cluster-b")
    return source, dest


# -- scenarios -----------------------------------------------------------------------------------------------------


def test_the_destination_serves_the_sources_committed_records_at_their_offsets_and_fails_over_with_the_barrier(
    serve,
):
    source, dest = clusters(serve)
    left_open = write_source(source.bootstrap)
    _, created, _ = mirror("create", dest, "--link", "a-to-b", "--source", source.bootstrap, "--topic", TOPIC)
    assert [p["partition"] for p in partitions_of(created)] == list(range(PARTITIONS))
    assert created["links"][0]["source_cluster_id"] == "cluster-a"
    caught_up = wait_caught_up(dest, "a-to-b")

    # Read-only while mirrored: B's own producers are refused, nothing is written.
    refused = []
    producer = Producer({"bootstrap.servers": dest.bootstrap, "message.timeout.ms": 5000, "retries": 0})
    producer.produce(TOPIC, value=b"refused", partition=0, on_delivery=lambda error, _: refused.append(error))
    producer.flush(10)
    assert refused and refused[0] is not None, "a produce to a mirror topic was acknowledged"

    # A's committed records, at A's offsets; the open transaction holds both at A's last stable offset.
    on_source = read_all(source.bootstrap)
    on_dest = read_all(dest.bootstrap)
    assert on_dest == on_source
    values = {value for _, _, value in on_dest}
    assert not any(v.startswith(b"aborted") or v.startswith(b"open") or v.startswith(b"after-open") for v in values)
    assert sum(v.startswith(b"committed") for v in values) == 90

    # Byte for byte: every batch B holds is A's batch at the same file position, CRC and offsets included.
    for partition in range(PARTITIONS):
        mirrored = batches(dest, partition)
        original = batches(source, partition)
        assert mirrored == original[: len(mirrored)]
        assert mirrored[-1]["last_offset"] + 1 == caught_up[partition]["log_end_offset"]

    # Failover: STOPPING with the barrier, whatever A still has open.
    _, failed_over, _ = mirror("failover", dest, "--link", "a-to-b")
    for status in partitions_of(failed_over):
        assert status["state"] == "STOPPED"
        assert status["barrier_offset"] == status["last_mirrored_offset"] == caught_up[status["partition"]]["log_end_offset"]
    for partition in range(PARTITIONS):
        stored = barriers(batches(dest, partition))
        assert len(stored) == 1, stored

    # B is writable: new idempotent and transactional producers on B, consumers reading from 0.
    fresh = idempotent_producer(dest.bootstrap)
    for i in range(30):
        fresh.produce(TOPIC, value=b"on-b-%03d" % i, partition=i % PARTITIONS)
    assert fresh.flush(30) == 0
    transactional = transactional_producer(dest.bootstrap, "committer")  # A's transactional id, reused on B
    transactional.begin_transaction()
    for i in range(30):
        transactional.produce(TOPIC, value=b"on-b-txn-%03d" % i, partition=i % PARTITIONS)
    transactional.commit_transaction(30)
    after = read_all(dest.bootstrap)
    mirrored_part = [r for r in after if not r[2].startswith(b"on-b")]
    assert mirrored_part == on_source, "the mirrored records changed at the failover"
    assert sum(r[2].startswith(b"on-b") for r in after) == 60
    for partition in range(PARTITIONS):
        in_partition = [r for r in after if r[0] == partition]
        first_own = next(i for i, r in enumerate(in_partition) if r[2].startswith(b"on-b"))
        assert all(r[2].startswith(b"on-b") for r in in_partition[first_own:]), "B's records before A's"

    left_open.abort_transaction(30)


def test_a_destination_killed_while_mirroring_resumes_after_a_restart_and_fails_over_once(serve):
    source, dest = clusters(serve)
    mirror("create", dest, "--link", "a-to-b", "--source", source.bootstrap, "--topic", TOPIC)
    producer = idempotent_producer(source.bootstrap)
    stop = threading.Event()

    def write():
        i = 0
        while not stop.is_set():
            producer.produce(TOPIC, value=b"%06d" % i, partition=i % PARTITIONS)
            producer.poll(0)
            i += 1
            if i % 500 == 0:
                time.sleep(0.01)
        assert producer.flush(60) == 0

    thread = threading.Thread(target=write)
    thread.start()
    time.sleep(1.5)
    dest.kill()
    time.sleep(0.5)
    dest.restart()
    time.sleep(1.0)
    stop.set()
    thread.join()
    caught_up = wait_caught_up(dest, "a-to-b")
    assert read_all(dest.bootstrap) == read_all(source.bootstrap)
    mirror("failover", dest, "--link", "a-to-b")
    # A restart after the failover neither fails over again nor fetches again.
    dest.stop()
    dest.restart()
    _, described, _ = mirror("describe", dest, "--link", "a-to-b")
    for status in partitions_of(described):
        assert status["state"] == "STOPPED"
        assert status["barrier_offset"] == caught_up[status["partition"]]["log_end_offset"]
    for partition in range(PARTITIONS):
        stored = batches(dest, partition)
        assert len(barriers(stored)) == 1
        assert stored[:-1] == batches(source, partition)[: len(stored) - 1]


def test_a_source_that_goes_away_is_retried_and_mirroring_resumes_when_it_is_back(serve):
    source, dest = clusters(serve, topic_partitions=1)
    producer = idempotent_producer(source.bootstrap)
    for i in range(100):
        producer.produce(TOPIC, value=b"before-%03d" % i, partition=0)
    assert producer.flush(30) == 0
    mirror("create", dest, "--link", "a-to-b", "--source", source.bootstrap, "--topic", TOPIC)
    wait_caught_up(dest, "a-to-b")
    source.kill()
    deadline = time.monotonic() + 30
    while True:
        _, described, _ = mirror("describe", dest, "--link", "a-to-b")
        status = partitions_of(described)[0]
        if status["state"] == "FAILED":
            break
        assert time.monotonic() < deadline, f"the lost source was not noticed: {status}"
        time.sleep(0.2)
    assert status["error"], status
    source.restart()
    producer = idempotent_producer(source.bootstrap)
    for i in range(100):
        producer.produce(TOPIC, value=b"after-%03d" % i, partition=0)
    assert producer.flush(30) == 0
    wait_caught_up(dest, "a-to-b", timeout_s=60)
    assert read_all(dest.bootstrap, partitions=1) == read_all(source.bootstrap, partitions=1)
    assert len(read_all(dest.bootstrap, partitions=1)) == 200


def test_promote_waits_until_the_mirror_has_caught_up_then_fails_over(serve):
    source, dest = clusters(serve)
    mirror("create", dest, "--link", "a-to-b", "--source", source.bootstrap, "--topic", TOPIC)
    mirror("pause", dest, "--link", "a-to-b")
    producer = idempotent_producer(source.bootstrap)
    for i in range(20_000):
        producer.produce(TOPIC, value=b"%05d" % i * 20, partition=i % PARTITIONS)
        producer.poll(0)
    assert producer.flush(60) == 0
    code, answer, err = mirror("promote", dest, "--link", "a-to-b", "--timeout-ms", "60000", expect_ok=False)
    assert code == 1 and answer["error"]["category"] == "invalid_request", (answer, err)  # paused: resume first
    mirror("resume", dest, "--link", "a-to-b")
    _, promoted, _ = mirror("promote", dest, "--link", "a-to-b", "--timeout-ms", "60000")
    assert all(p["state"] == "STOPPED" for p in partitions_of(promoted))
    assert len(read_all(dest.bootstrap)) == 20_000


def test_a_failback_mirrors_the_topic_back_into_the_former_source(serve):
    a, b = clusters(serve, topic_partitions=1)
    producer = idempotent_producer(a.bootstrap)
    for i in range(50):
        producer.produce(TOPIC, value=b"a-%03d" % i, partition=0)
    assert producer.flush(30) == 0
    mirror("create", b, "--link", "a-to-b", "--source", a.bootstrap, "--topic", TOPIC)
    wait_caught_up(b, "a-to-b")
    mirror("failover", b, "--link", "a-to-b")
    # B forgets the failed-over link; its topic stays writable.
    _, deleted, _ = mirror("delete", b, "--link", "a-to-b")
    assert [p["state"] for p in partitions_of(deleted)] == ["STOPPED"]
    _, listed, _ = mirror("list", b)
    assert listed["links"] == []
    code, answer, _ = mirror("delete", b, "--link", "a-to-b", expect_ok=False)
    assert code == 1 and answer["error"]["category"] == "unknown_link", answer
    producer = idempotent_producer(b.bootstrap)
    for i in range(50):
        producer.produce(TOPIC, value=b"b-%03d" % i, partition=0)
    assert producer.flush(30) == 0
    # A comes back as B's mirror: its topic is aligned with B's log, then follows it.
    code, _, err = mirror("create", a, "--link", "b-to-a", "--source", b.bootstrap, "--topic", TOPIC, expect_ok=False)
    assert code == 1 and "reverse" in err, err
    mirror("reverse", a, "--link", "b-to-a", "--source", b.bootstrap, "--topic", TOPIC)
    wait_caught_up(a, "b-to-a")
    assert read_all(a.bootstrap, partitions=1) == read_all(b.bootstrap, partitions=1)
    assert batches(a, 0) == batches(b, 0)
    mirror("failover", a, "--link", "b-to-a")
    producer = idempotent_producer(a.bootstrap)
    producer.produce(TOPIC, value=b"a-again", partition=0)
    assert producer.flush(30) == 0
    values = [value for _, _, value in read_all(a.bootstrap, partitions=1)]
    assert values == [b"a-%03d" % i for i in range(50)] + [b"b-%03d" % i for i in range(50)] + [b"a-again"]


def test_mirror_administration_refuses_what_it_cannot_do_with_a_typed_error(serve):
    source, dest = clusters(serve, topic_partitions=1)
    code, answer, _ = mirror("describe", dest, "--link", "missing", expect_ok=False)
    assert code == 1 and answer["error"]["category"] == "unknown_link"
    code, answer, _ = mirror("create", dest, "--link", "self", "--source", dest.bootstrap, "--topic", TOPIC, expect_ok=False)
    assert code == 1 and answer["error"]["category"] in ("invalid_request", "source"), answer
    code, answer, _ = mirror("create", dest, "--link", "bad name!", "--source", source.bootstrap, "--topic", TOPIC, expect_ok=False)
    assert code == 1 and answer["error"]["category"] == "invalid_request"
    code, answer, _ = mirror("create", dest, "--link", "ghost", "--source", source.bootstrap, "--topic", "no-such-topic", expect_ok=False)
    assert code == 1 and answer["error"]["category"] == "source", answer
    code, _, err = mirrorlog("mirror", "list", "--bootstrap", "127.0.0.1:1")
    assert code == 1 and "cannot reach" in err
    mirror("create", dest, "--link", "a-to-b", "--source", source.bootstrap, "--topic", TOPIC)
    code, answer, _ = mirror("create", dest, "--link", "again", "--source", source.bootstrap, "--topic", TOPIC, expect_ok=False)
    assert code == 1 and answer["error"]["category"] == "already_exists"
    code, answer, _ = mirror("failover", dest, "--link", "a-to-b", "--topic", "other", expect_ok=False)
    assert code == 1 and answer["error"]["category"] == "unknown_topic"
    _, listed, _ = mirror("list", dest)
    assert [link["name"] for link in listed["links"]] == ["a-to-b"]


# -- topologies ------------------------------------------------------------------------------------------------------


def produce_values(bootstrap, values, topic=TOPIC, partitions=PARTITIONS):
    producer = idempotent_producer(bootstrap)
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=i % partitions)
    assert producer.flush(60) == 0


def test_a_chain_fails_over_in_the_middle_while_the_end_still_mirrors_then_at_the_end(serve):
    a = serve("--cluster-id", "cluster-a", "--topic", f"{TOPIC}:{PARTITIONS}")
    b = serve("--cluster-id", "cluster-b")
    c = serve("--cluster-id", "cluster-c")
    produce_values(a.bootstrap, [b"a-%03d" % i for i in range(90)])
    mirror("create", b, "--link", "a-to-b", "--source", a.bootstrap, "--topic", TOPIC)
    wait_caught_up(b, "a-to-b")
    mirror("create", c, "--link", "b-to-c", "--source", b.bootstrap, "--topic", TOPIC)
    wait_caught_up(c, "b-to-c")
    # B leaves the chain; C keeps mirroring B: B's barrier, then B's own records, reach C.
    mirror("failover", b, "--link", "a-to-b")
    produce_values(b.bootstrap, [b"b-%03d" % i for i in range(30)])
    wait_caught_up(c, "b-to-c")
    assert read_all(c.bootstrap) == read_all(b.bootstrap)
    for partition in range(PARTITIONS):
        assert batches(c, partition) == batches(b, partition)
        assert len(barriers(batches(c, partition))) == 1
    # Then C fails over: its own barrier after B's, and C is writable.
    mirror("failover", c, "--link", "b-to-c")
    produce_values(c.bootstrap, [b"c-%03d" % i for i in range(30)])
    values = [value for _, _, value in read_all(c.bootstrap)]
    assert sorted(values) == sorted([b"a-%03d" % i for i in range(90)] + [b"b-%03d" % i for i in range(30)]
                                    + [b"c-%03d" % i for i in range(30)])
    for partition in range(PARTITIONS):
        stored = batches(c, partition)
        assert len(barriers(stored)) == 2
        assert stored[: len(batches(b, partition))] == batches(b, partition)


def test_fan_in_mirrors_two_sources_into_one_destination(serve):
    a = serve("--cluster-id", "cluster-a", "--topic", "x:2")
    b = serve("--cluster-id", "cluster-b", "--topic", "y:1")
    c = serve("--cluster-id", "cluster-c")
    produce_values(a.bootstrap, [b"x-%03d" % i for i in range(40)], topic="x", partitions=2)
    produce_values(b.bootstrap, [b"y-%03d" % i for i in range(40)], topic="y", partitions=1)
    mirror("create", c, "--link", "from-a", "--source", a.bootstrap, "--topic", "x")
    mirror("create", c, "--link", "from-b", "--source", b.bootstrap, "--topic", "y")
    wait_caught_up(c, "from-a")
    wait_caught_up(c, "from-b")
    assert read_all(c.bootstrap, topic="x", partitions=2) == read_all(a.bootstrap, topic="x", partitions=2)
    assert read_all(c.bootstrap, topic="y", partitions=1) == read_all(b.bootstrap, topic="y", partitions=1)
    _, listed, _ = mirror("list", c)
    assert sorted(link["name"] for link in listed["links"]) == ["from-a", "from-b"]
    # One link fails over; the other keeps mirroring.
    mirror("failover", c, "--link", "from-a")
    produce_values(b.bootstrap, [b"y-late-%03d" % i for i in range(10)], topic="y", partitions=1)
    wait_caught_up(c, "from-b")
    assert len(read_all(c.bootstrap, topic="y", partitions=1)) == 50


# -- a network that stalls and cuts ----------------------------------------------------------------------------------


class Proxy:
    """A TCP proxy on loopback: forwards every connection to the target port; `stall` holds the bytes back,
    `cut` closes every connection it carries."""

    def __init__(self):
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.target = None
        self.stalled = threading.Event()
        self.sockets = []
        self.lock = threading.Lock()
        self.closed = False
        self.accepted = 0
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target), timeout=5)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.sockets += [client, upstream]
                self.accepted += 1
            threading.Thread(target=self.pipe, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self.pipe, args=(upstream, client), daemon=True).start()

    def pipe(self, source, target):
        try:
            while True:
                data = source.recv(1 << 16)
                if not data:
                    break
                while self.stalled.is_set():
                    time.sleep(0.01)
                target.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, target):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut(self):
        with self.lock:
            sockets, self.sockets = self.sockets, []
        for s in sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass

    def close(self):
        self.closed = True
        self.cut()
        self.listener.close()


def test_a_link_through_a_network_that_stalls_and_cuts_reconnects_and_stays_byte_identical(serve):
    proxy = Proxy()
    # A tells its clients (the mirror link among them) to reach it through the proxy.
    a = serve("--cluster-id", "cluster-a", "--topic", f"{TOPIC}:{PARTITIONS}",
              "--advertised-listener", f"127.0.0.1:{proxy.port}")
    proxy.target = a.port
    b = serve("--cluster-id", "cluster-b")
    mirror("create", b, "--link", "a-to-b", "--source", f"127.0.0.1:{proxy.port}", "--topic", TOPIC)
    producer = idempotent_producer(a.bootstrap)
    for round_ in range(6):
        for i in range(2000):
            producer.produce(TOPIC, value=b"r%d-%05d" % (round_, i), partition=i % PARTITIONS)
        assert producer.flush(60) == 0
        if round_ % 2 == 0:
            proxy.stalled.set()
            time.sleep(1.5)
            proxy.stalled.clear()
        else:
            proxy.cut()
        time.sleep(0.3)
    caught_up = wait_caught_up(b, "a-to-b", timeout_s=120)
    assert sum(p["log_end_offset"] for p in caught_up) == 12_000
    assert read_all(b.bootstrap) == read_all(a.bootstrap)
    for partition in range(PARTITIONS):
        assert batches(b, partition) == batches(a, partition)
    # The link went through the proxy and connected again after each cut.
    assert proxy.accepted >= 4, proxy.accepted
    proxy.close()


def test_a_failover_under_transactional_load_keeps_a_prefix_of_each_partitions_committed_records(serve):
    source, dest = clusters(serve)
    mirror("create", dest, "--link", "a-to-b", "--source", source.bootstrap, "--topic", TOPIC)
    stop = threading.Event()
    errors = []

    def transactions():
        producer = transactional_producer(source.bootstrap, "loader")
        n = 0
        try:
            while not stop.is_set():
                outcome = "abort" if n % 3 == 2 else "commit"
                producer.begin_transaction()
                for i in range(30):
                    producer.produce(TOPIC, value=b"%s-%05d-%02d" % (outcome.encode(), n, i), partition=i % PARTITIONS)
                if outcome == "commit":
                    producer.commit_transaction(30)
                else:
                    producer.abort_transaction(30)
                n += 1
        except Exception as error:  # noqa: BLE001 - reported by the test
            errors.append(error)

    thread = threading.Thread(target=transactions)
    thread.start()
    time.sleep(2.0)
    _, failed_over, _ = mirror("failover", dest, "--link", "a-to-b")
    time.sleep(0.5)
    stop.set()
    thread.join()
    assert errors == []
    assert all(p["state"] == "STOPPED" for p in partitions_of(failed_over))
    # B's own producers, A's transactional id among them, write after the barrier.
    on_b = transactional_producer(dest.bootstrap, "loader")
    on_b.begin_transaction()
    for i in range(PARTITIONS):
        on_b.produce(TOPIC, value=b"on-b-%02d" % i, partition=i)
    on_b.commit_transaction(30)
    on_source = read_all(source.bootstrap)
    on_dest = read_all(dest.bootstrap)
    for partition in range(PARTITIONS):
        theirs = [r for r in on_source if r[0] == partition]
        ours = [r for r in on_dest if r[0] == partition]
        mirrored = [r for r in ours if not r[2].startswith(b"on-b")]
        assert mirrored == theirs[: len(mirrored)], f"partition {partition}: not a prefix of A's committed records"
        assert mirrored, f"partition {partition}: nothing was mirrored before the failover"
        assert [r[2] for r in ours[len(mirrored):]] == [b"on-b-%02d" % partition]
        assert not any(r[2].startswith(b"abort") for r in ours)
        assert len({r[2] for r in ours}) == len(ours), "duplicates"


def test_a_destination_killed_during_stopping_completes_the_failover_once_after_a_restart(serve):
    source = serve("--cluster-id", "cluster-a", "--topic", f"{TOPIC}:{PARTITIONS}")
    # Each STOPPING step of the destination pauses 400 ms (a test fault), so the kill lands inside the sequence.
    dest = serve("--cluster-id", "cluster-b", "--fault-stopping-step-pause-ms", "400")
    produce_values(source.bootstrap, [b"a-%03d" % i for i in range(60)])
    mirror("create", dest, "--link", "a-to-b", "--source", source.bootstrap, "--topic", TOPIC)
    caught_up = wait_caught_up(dest, "a-to-b")
    failover = subprocess.Popen(
        [os.environ["MIRRORLOG_BIN"], "mirror", "failover", "--bootstrap", dest.bootstrap, "--link", "a-to-b"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    # The request is recorded in the link registry before STOPPING begins; kill once it is there.
    registry = Path(dest.data_dir) / "__mirrorlog_mirror_links-0" / "mirrorlog.metadata"
    deadline = time.monotonic() + 30
    while b'"failover_requested":true' not in (registry.read_bytes() if registry.exists() else b""):
        assert time.monotonic() < deadline, "the failover request never reached the registry"
        time.sleep(0.05)
    time.sleep(0.6)
    dest.kill()
    assert failover.wait(30) != 0, "the failover answered although the destination was killed in the middle"
    stopping = [p for p in range(PARTITIONS) if barriers(batches(dest, p)) == []]
    assert stopping, "every partition had finished STOPPING before the kill: the test proves nothing"
    dest.restart()
    _, described, _ = mirror("describe", dest, "--link", "a-to-b")
    for status in partitions_of(described):
        assert status["state"] == "STOPPED", status
        assert status["barrier_offset"] == caught_up[status["partition"]]["log_end_offset"], status
    for partition in range(PARTITIONS):
        stored = batches(dest, partition)
        assert len(barriers(stored)) == 1, f"partition {partition}: {len(barriers(stored))} barriers"
        assert stored[:-1] == batches(source, partition)
    produce_values(dest.bootstrap, [b"b-%03d" % i for i in range(6)])
    assert len(read_all(dest.bootstrap)) == 66
