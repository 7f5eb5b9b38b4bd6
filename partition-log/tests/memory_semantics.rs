//! The Kafka-semantics scenarios on the in-memory reference backend.

use storage::conformance::MemoryBackend;

partition_log::kafka_semantics_suite!(MemoryBackend::default());
