//! The Kafka-semantics scenarios on the in-memory reference backend.

use storage_testkit::conformance::MemoryBackend;

partition_log_testkit::kafka_semantics_suite!(MemoryBackend::default());
