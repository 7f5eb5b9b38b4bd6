package dev.mirrorlog.streams;

import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * A stateful Kafka Streams application with exactly-once processing (exactly_once_v2): it counts how often each
 * word occurs. An input record's value is a word; the application re-keys the stream by the word (a repartition
 * topic), counts per word in a state store (a changelog topic) and writes every new count to the output topic as
 * {@code word -> count} (the record cache is off, so every input record yields one output record). Read with
 * read_committed, each word's counts in the output are therefore 1, 2, 3, ... with none repeated or skipped: a
 * record processed twice or lost shows as a count out of sequence.
 *
 * <p>Arguments: {@code bootstrap application-id input-topic output-topic state-dir [key=value ...]}; the pairs
 * override Streams configuration. It prints one JSON object per line on stdout: {@code {"state": S}} on every
 * state change, {@code {"thread": NAME}} for each stream thread once running, {@code {"uncaught": E}} when a stream
 * thread dies of an exception (with its causes) and {@code {"closed": ...}} once closed on exit. It runs until
 * SIGTERM (then closes cleanly) or until the application stops by itself (ERROR or NOT_RUNNING: exits 3). An
 * uncaught exception shuts the client down, which is what Streams does when the application sets no handler.
 */
public final class WordCount {
    private WordCount() {}

    public static void main(String[] args) throws InterruptedException {
        if (args.length < 5) {
            System.err.println("usage: WordCount BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR [key=value ...]");
            System.exit(2);
        }
        Properties config = new Properties();
        config.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        config.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        config.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        config.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        config.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        config.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        config.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        config.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        config.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 500);
        config.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        for (int i = 5; i < args.length; i++) {
            int equals = args[i].indexOf('=');
            if (equals <= 0) {
                System.err.println("not a key=value pair: " + args[i]);
                System.exit(2);
            }
            config.put(args[i].substring(0, equals), args[i].substring(equals + 1));
        }

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(args[2], Consumed.with(Serdes.String(), Serdes.String()))
                .groupBy((key, word) -> word, Grouped.with("by-word", Serdes.String(), Serdes.String()))
                .count(Materialized.as("counts"))
                .toStream()
                .mapValues(count -> Long.toString(count))
                .to(args[3], Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(builder.build(), config);
        CountDownLatch stopped = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            print("state", now.toString());
            if (now == KafkaStreams.State.RUNNING) {
                for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
                    print("thread", thread.threadName());
                }
            }
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                stopped.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(exception -> {
            print("uncaught", withCauses(exception));
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close();
            print("closed", "the application closed its KafkaStreams on exit");
        }));
        streams.start();
        stopped.await();
        // Stopped by itself (not by SIGTERM, whose hook exits the JVM with the close above).
        System.exit(3);
    }

    /** The exception and its causes, outermost first: a Streams exception often names its cause only there. */
    private static String withCauses(Throwable exception) {
        StringBuilder text = new StringBuilder(String.valueOf(exception));
        for (Throwable cause = exception.getCause(); cause != null; cause = cause.getCause()) {
            text.append("\ncaused by: ").append(cause);
        }
        return text.toString();
    }

    private static synchronized void print(String key, String value) {
        System.out.println("{\"" + key + "\": \"" + value.replace("\\", "\\\\").replace("\"", "\\\"")
                .replace("\n", "\\n") + "\"}");
        System.out.flush();
    }
}
