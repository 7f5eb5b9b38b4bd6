package dev.mirrorlog.clients;

import java.io.FileInputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The real-client suite's scenarios with Apache Kafka's Java client; prints what happened as one JSON object on
 * stdout (broker/tests/clients/client_programs.py drives it).
 *
 * <pre>
 * produce-idempotent BOOTSTRAP TOPIC PARTITIONS COUNT
 * produce-transactional BOOTSTRAP TOPIC PARTITIONS TRANSACTIONAL_ID PLAN   (PLAN: commit:6,abort:4,...)
 * consume BOOTSTRAP TOPIC PARTITIONS ISOLATION EXPECTED                  (read_committed|read_uncommitted)
 * consume-group BOOTSTRAP TOPIC PARTITIONS GROUP COUNT    (subscribe() as a member of GROUP; COUNT records,
 *                                                           committed synchronously after each poll; then leave)
 * group-member BOOTSTRAP TOPIC PARTITIONS GROUP   (subscribe() as a member of GROUP until killed: prints each
 *     record it processed as a JSON line {"partition": P, "offset": O} and commits it synchronously, or prints
 *     {"commit_refused": E} when a rebalance refused the commit)
 * transform BOOTSTRAP TOPIC PARTITIONS GROUP OUTPUT_TOPIC TRANSACTIONAL_ID COUNT
 *     (exactly once: a read_committed member of GROUP copies COUNT records of TOPIC to OUTPUT_TOPIC's same
 *     partition, one transaction per poll carrying the group's offsets with sendOffsetsToTransaction(offsets,
 *     groupMetadata), i.e. TxnOffsetCommit v3 of KIP-447)
 * </pre>
 *
 * Record i of a run goes to partition i % PARTITIONS. Every result is {"records": [[partition, offset, value],
 * ...]}, for a transactional run one such list per transaction under "transactions".
 */
public final class ClientScenarios {
    /** Each step (a produce, a transaction's end, a consumer's wait) must finish within this. */
    private static final Duration STEP_TIMEOUT = Duration.ofSeconds(30);

    /** A consumer that has what it expects waits this long for records it should not see. */
    private static final Duration IDLE_AFTER_EXPECTED = Duration.ofSeconds(1);

    private ClientScenarios() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 4) {
            usage();
        }
        String scenario = args[0];
        String bootstrap = args[1];
        String topic = args[2];
        int partitions = Integer.parseInt(args[3]);
        String result;
        if (scenario.equals("produce-idempotent") && args.length == 5) {
            result = produceIdempotent(bootstrap, topic, partitions, Integer.parseInt(args[4]));
        } else if (scenario.equals("produce-transactional") && args.length == 6) {
            result = produceTransactional(bootstrap, topic, partitions, args[4], args[5]);
        } else if (scenario.equals("consume") && args.length == 6) {
            result = consume(bootstrap, topic, partitions, args[4], Integer.parseInt(args[5]));
        } else if (scenario.equals("consume-group") && args.length == 6) {
            result = consumeGroup(bootstrap, topic, args[4], Integer.parseInt(args[5]));
        } else if (scenario.equals("group-member") && args.length == 5) {
            groupMember(bootstrap, topic, args[4]);
            return;
        } else if (scenario.equals("transform") && args.length == 8) {
            result = transform(bootstrap, topic, args[4], args[5], args[6], Integer.parseInt(args[7]));
        } else {
            usage();
            return;
        }
        System.out.println(result);
    }

    private static void usage() {
        System.err.println("usage: ClientScenarios produce-idempotent|produce-transactional|consume|consume-group BOOTSTRAP TOPIC "
                + "PARTITIONS ...");
        System.exit(2);
    }

    /**
     * A client's first properties: those of the Kafka client properties file MIRRORLOG_CLIENT_PROPERTIES names
     * (security.protocol, sasl.*, ssl.*: the secured-listener tests), none without it.
     */
    private static Properties securedConnection() {
        Properties config = new Properties();
        String path = System.getenv("MIRRORLOG_CLIENT_PROPERTIES");
        if (path != null) {
            try (FileInputStream in = new FileInputStream(path)) {
                config.load(in);
            } catch (IOException e) {
                throw new UncheckedIOException("MIRRORLOG_CLIENT_PROPERTIES " + path, e);
            }
        }
        return config;
    }

    private static Properties producerConfig(String bootstrap) {
        Properties config = securedConnection();
        config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        config.put(ProducerConfig.ACKS_CONFIG, "all");
        config.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        config.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, String.valueOf(STEP_TIMEOUT.toMillis()));
        config.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, String.valueOf(STEP_TIMEOUT.toMillis()));
        config.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        config.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        config.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        return config;
    }

    /** Sends COUNT values "PREFIX-i" to partition i % PARTITIONS, waits for every acknowledgement. */
    private static String send(KafkaProducer<String, String> producer, String topic, int partitions, String prefix,
            int count) throws Exception {
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        List<String> values = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            String value = prefix + "-" + i;
            values.add(value);
            sent.add(producer.send(new ProducerRecord<>(topic, i % partitions, null, value)));
        }
        producer.flush();
        List<String> records = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            RecordMetadata metadata = sent.get(i).get(STEP_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
            records.add(record(metadata.partition(), metadata.offset(), values.get(i)));
        }
        return "[" + String.join(",", records) + "]";
    }

    private static String produceIdempotent(String bootstrap, String topic, int partitions, int count)
            throws Exception {
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerConfig(bootstrap))) {
            return "{\"records\":" + send(producer, topic, partitions, "idempotent", count) + "}";
        }
    }

    private static String produceTransactional(String bootstrap, String topic, int partitions,
            String transactionalId, String plan) throws Exception {
        Properties config = producerConfig(bootstrap);
        config.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        List<String> transactions = new ArrayList<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(config)) {
            producer.initTransactions();
            String[] steps = plan.split(",");
            for (int n = 0; n < steps.length; n++) {
                String[] step = steps[n].split(":");
                String outcome = step[0];
                if (step.length != 2 || !(outcome.equals("commit") || outcome.equals("abort"))) {
                    throw new IllegalArgumentException("PLAN step " + steps[n] + ": want commit:N or abort:N");
                }
                producer.beginTransaction();
                // send() waits for every acknowledgement, so an aborted transaction's records are in the log
                // before the abort.
                String records = send(producer, topic, partitions, "txn" + n + "-" + outcome,
                        Integer.parseInt(step[1]));
                if (outcome.equals("commit")) {
                    producer.commitTransaction();
                } else {
                    producer.abortTransaction();
                }
                transactions.add("{\"outcome\":\"" + outcome + "\",\"records\":" + records + "}");
            }
        }
        return "{\"transactions\":[" + String.join(",", transactions) + "]}";
    }

    private static String consume(String bootstrap, String topic, int partitions, String isolation, int expected) {
        if (!isolation.equals("read_committed") && !isolation.equals("read_uncommitted")) {
            throw new IllegalArgumentException("ISOLATION must be read_committed or read_uncommitted");
        }
        Properties config = securedConnection();
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        config.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "200");
        config.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        config.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        List<TopicPartition> assigned = new ArrayList<>();
        for (int p = 0; p < partitions; p++) {
            assigned.add(new TopicPartition(topic, p));
        }
        List<String> records = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(config)) {
            // No group.id: assign() and seekToBeginning() (ListOffsets) need no group coordinator.
            consumer.assign(assigned);
            consumer.seekToBeginning(assigned);
            long deadline = System.nanoTime() + STEP_TIMEOUT.toNanos();
            while (System.nanoTime() < deadline) {
                boolean satisfied = records.size() >= expected;
                Duration wait = satisfied ? IDLE_AFTER_EXPECTED : Duration.ofMillis(500);
                ConsumerRecords<String, String> batch = consumer.poll(wait);
                for (ConsumerRecord<String, String> r : batch) {
                    records.add(record(r.partition(), r.offset(), r.value()));
                }
                if (satisfied && batch.isEmpty()) {
                    break;
                }
            }
        }
        return "{\"records\":[" + String.join(",", records) + "]}";
    }

    /** A member of GROUP that starts at the earliest offset and commits only when told to. */
    private static Properties groupConsumerConfig(String bootstrap, String group) {
        Properties config = securedConnection();
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        config.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        config.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
        config.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        config.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "200");
        config.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        config.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return config;
    }

    private static void groupMember(String bootstrap, String topic, String group) throws InterruptedException {
        Properties config = groupConsumerConfig(bootstrap, group);
        config.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
        config.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "10");
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(config)) {
            consumer.subscribe(List.of(topic));
            while (true) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    // Slow enough that a kill lands mid-stream.
                    Thread.sleep(10);
                    System.out.println("{\"partition\":" + r.partition() + ",\"offset\":" + r.offset() + "}");
                    System.out.flush();
                    try {
                        consumer.commitSync(Map.of(new TopicPartition(r.topic(), r.partition()),
                                new OffsetAndMetadata(r.offset() + 1)));
                    } catch (KafkaException refused) {
                        // The record is processed again by whoever gets the partition.
                        System.out.println("{\"commit_refused\":\"" + refused.getClass().getSimpleName() + "\"}");
                        System.out.flush();
                    }
                }
            }
        }
    }

    private static String consumeGroup(String bootstrap, String topic, String group, int count) {
        Properties config = groupConsumerConfig(bootstrap, group);
        List<String> records = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(config)) {
            consumer.subscribe(List.of(topic));
            long deadline = System.nanoTime() + STEP_TIMEOUT.toNanos();
            while (records.size() < count && System.nanoTime() < deadline) {
                ConsumerRecords<String, String> batch = consumer.poll(Duration.ofMillis(500));
                for (ConsumerRecord<String, String> r : batch) {
                    records.add(record(r.partition(), r.offset(), r.value()));
                }
                if (!batch.isEmpty()) {
                    consumer.commitSync();
                }
            }
        }
        return "{\"records\":[" + String.join(",", records) + "]}";
    }

    private static String transform(String bootstrap, String topic, String group, String output,
            String transactionalId, int count) {
        Properties consumerConfig = groupConsumerConfig(bootstrap, group);
        consumerConfig.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        Properties producerConfig = producerConfig(bootstrap);
        producerConfig.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        List<String> records = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerConfig);
                KafkaProducer<String, String> producer = new KafkaProducer<>(producerConfig)) {
            producer.initTransactions();
            consumer.subscribe(List.of(topic));
            long deadline = System.nanoTime() + STEP_TIMEOUT.toNanos();
            while (records.size() < count && System.nanoTime() < deadline) {
                ConsumerRecords<String, String> batch = consumer.poll(Duration.ofMillis(500));
                if (batch.isEmpty()) {
                    continue;
                }
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<String, String> r : batch) {
                    producer.send(new ProducerRecord<>(output, r.partition(), null, "copy-" + r.value()));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    records.add(record(r.partition(), r.offset(), r.value()));
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                producer.commitTransaction();
            }
        }
        return "{\"records\":[" + String.join(",", records) + "]}";
    }

    private static String record(int partition, long offset, String value) {
        return "[" + partition + "," + offset + "," + jsonString(value) + "]";
    }

    private static String jsonString(String text) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }
}
