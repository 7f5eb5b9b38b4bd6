//! Kafka's vocabulary, shared by every layer that speaks it: producer-state, the transaction coordinator, the
//! broker and the simulator name the same things with the same types.
//!
//! - [`ids`]: [`ProducerId`], [`ProducerEpoch`], [`CoordinatorEpoch`], [`TransactionalId`], [`ClusterId`];
//! - [`error`]: [`KafkaError`] (Kafka's error names and wire codes) and [`ClientErrorClass`] (what a client does
//!   with each);
//! - [`transaction_version`]: [`TransactionVersion`] (the `transaction.version` feature, KIP-890).
//!
//! What a request *version* can carry (e.g. PRODUCER_FENCED only from EndTxn v2) is the wire front end's
//! translation, not this crate's: these are the meanings, not their encodings.

pub mod error;
pub mod ids;
pub mod transaction_version;

pub use error::{ClientErrorClass, KafkaError, NO_ERROR};
pub use ids::{ClusterId, CoordinatorEpoch, ProducerEpoch, ProducerId, TransactionalId};
pub use transaction_version::TransactionVersion;
