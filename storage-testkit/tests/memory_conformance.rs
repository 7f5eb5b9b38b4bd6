//! The conformance suite on the in-memory reference backend.

use storage_testkit::conformance::MemoryBackend;

storage_testkit::conformance_suite!(MemoryBackend::default());
