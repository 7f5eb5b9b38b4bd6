//! The conformance suite on the in-memory reference backend.

use storage::conformance::MemoryBackend;

storage::conformance_suite!(MemoryBackend::default());
