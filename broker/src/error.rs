//! The broker's error enum: what stops it from starting or serving (request-level failures are Kafka error codes
//! in responses, not these).

/// Why the broker could not start or had to stop.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// The listen address could not be bound.
    #[error("cannot listen on {address}: {source}")]
    Listen {
        /// The address.
        address: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The listeners, TLS or SASL settings contradict each other (a TLS listener without a certificate, two
    /// listeners of one protocol, …).
    #[error("listeners: {0}")]
    Listeners(String),
    /// The TLS certificate, key or client CA could not be loaded.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    /// The storage configuration could not be opened.
    #[error("storage: {0}")]
    Config(#[from] storage_config::ConfigError),
    /// The node could not open or close.
    #[error(transparent)]
    Node(#[from] node::NodeError),
    /// The mirror links' thread could not start.
    #[error("cannot start the mirror links' thread: {0}")]
    MirrorThread(std::io::Error),
}
