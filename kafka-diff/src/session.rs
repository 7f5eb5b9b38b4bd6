//! [`Session`]: one scenario's connection to the broker under test, what it observed, and the (API, version)
//! pairs it called.
//!
//! Observations are normalised as they are recorded, so that two brokers' runs compare with `==`: producer ids
//! become `P1`, `P2`… in the order the scenario first saw them (Kafka's first block and serve's need not start at
//! the same id), and nothing that names a broker (cluster id, node id, host, port, throttle time, error message
//! text) is recorded at all.
//!
//! Setup steps a client would retry (a coordinator still loading, a transaction whose markers are still being
//! written, a topic whose leader is not elected yet) are retried here too, a bounded number of times; only the
//! answer a client ends up acting on is observed.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, Encodable};
use mirror_link::security::ClientSecurity;
use mirror_link::{KafkaConnection, LinkError};
use serde_json::{json, Value};

use crate::error::DiffError;

/// How long a call may take before the scenario fails.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest response the driver reads (a fetch of a scenario's partitions is far smaller).
const MAX_RESPONSE_BYTES: usize = 64 << 20;
/// How often a retriable setup answer is asked again, and how long apart.
const RETRIES: u32 = 100;
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// Error codes a client retries in the steps that retry: LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER,
/// REQUEST_TIMED_OUT, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
/// CONCURRENT_TRANSACTIONS. (UNKNOWN_TOPIC_OR_PARTITION is an answer the scenarios compare, not retried: topics
/// are waited for when they are created.)
pub const RETRIABLE: &[i16] = &[5, 6, 7, 14, 15, 16, 51];

/// One scenario's session; see the module docs.
pub struct Session {
    bootstrap: String,
    /// How to reach the broker (PLAINTEXT unless `--command-config` says otherwise).
    security: ClientSecurity,
    scenario: String,
    connection: Option<KafkaConnection>,
    producer_ids: BTreeMap<i64, usize>,
    observations: Vec<Value>,
    calls: BTreeSet<(i16, i16)>,
}

impl Session {
    /// A session for `scenario` against the broker at `bootstrap` (connected on first use).
    pub fn new(bootstrap: &str, scenario: &str) -> Self {
        Session {
            bootstrap: bootstrap.to_owned(),
            security: ClientSecurity::plaintext(),
            scenario: scenario.to_owned(),
            connection: None,
            producer_ids: BTreeMap::new(),
            observations: Vec::new(),
            calls: BTreeSet::new(),
        }
    }

    /// The session connects as `security` says (a Kafka client properties file's settings).
    pub fn secured(mut self, security: ClientSecurity) -> Self {
        self.security = security;
        self
    }

    /// A topic name of this scenario's own: `<scenario>-<suffix>`.
    pub fn topic(&self, suffix: &str) -> String {
        format!("{}-{suffix}", self.scenario.replace('_', "-"))
    }

    /// A transactional id of this scenario's own.
    pub fn transactional_id(&self, suffix: &str) -> String {
        format!("{}-{suffix}", self.scenario)
    }

    /// Records one observation: `step` names it, `value` is already normalised.
    pub fn observe(&mut self, step: &str, value: Value) {
        self.observations.push(json!({ "step": step, "seen": value }));
    }

    /// A producer id as the scenario knows it: `-1` stays `-1` (no producer), every other id becomes `P<n>`.
    pub fn producer(&mut self, id: i64) -> Value {
        if id < 0 {
            return json!(id);
        }
        let next = self.producer_ids.len() + 1;
        let ordinal = *self.producer_ids.entry(id).or_insert(next);
        json!(format!("P{ordinal}"))
    }

    /// The scenario's observations, in order.
    pub fn into_parts(self) -> (Vec<Value>, BTreeSet<(i16, i16)>) {
        (self.observations, self.calls)
    }

    async fn connection(&mut self) -> Result<&mut KafkaConnection, DiffError> {
        if self.connection.is_none() {
            let connection = KafkaConnection::connect_secured(
                &self.bootstrap,
                "kafka-diff",
                CALL_TIMEOUT,
                MAX_RESPONSE_BYTES,
                &self.security,
            )
            .await
            .map_err(DiffError::Link)?;
            self.calls.insert((ApiKey::ApiVersions as i16, 0));
            self.connection = Some(connection);
        }
        self.connection.as_mut().ok_or(DiffError::NotConnected)
    }

    /// Sends `request` as `key` at `version` and decodes the answer. A connection the broker closed is a
    /// [`DiffError::Link`]; the next call reconnects.
    ///
    /// Answers are decoded without `kafka-shape`'s walk (it has response layouts only for the APIs a mirror
    /// link calls): the driver talks only to brokers its caller started, and a test tool, not a service, is what
    /// a hostile answer could make allocate.
    pub async fn call<Q: Encodable, A: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Q,
    ) -> Result<A, DiffError> {
        self.calls.insert((key as i16, version));
        let result = self.connection().await?.call_trusted(key, version, request).await;
        if result.is_err() {
            self.connection = None;
        }
        result.map_err(DiffError::Link)
    }

    /// Like [`Self::call`], but a broker closing the connection is an answer: `Ok(None)`.
    pub async fn call_or_closed<Q: Encodable, A: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Q,
    ) -> Result<Option<A>, DiffError> {
        match self.call(key, version, request).await {
            Ok(answer) => Ok(Some(answer)),
            Err(DiffError::Link(LinkError::Io { .. })) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Sends `request` without waiting for an answer (Produce with acks 0).
    pub async fn send_only<Q: Encodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Q,
    ) -> Result<(), DiffError> {
        self.calls.insert((key as i16, version));
        self.connection()
            .await?
            .send_only(key, version, request)
            .await
            .map_err(DiffError::Link)
    }

    /// Calls until `code` of the answer is not retriable (at most [`RETRIES`] times), as a client retries.
    pub async fn call_until<Q: Encodable, A: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Q,
        code: impl Fn(&A) -> i16,
    ) -> Result<A, DiffError> {
        let mut attempt = 0;
        loop {
            let answer: A = self.call(key, version, request).await?;
            attempt += 1;
            if !RETRIABLE.contains(&code(&answer)) || attempt >= RETRIES {
                return Ok(answer);
            }
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }
}
