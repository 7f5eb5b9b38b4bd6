//! The clients: idempotent and transactional producers and applications, speaking Kafka's requests to their
//! cluster's node at the versions a current client uses and doing what Kafka's clients do with each answer
//! (`KafkaError::client_class`, kafka-semantics §9; see the module docs of [`super`]).

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest, ProduceRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_types::{ClientErrorClass, KafkaError, ProducerEpoch, ProducerId, TransactionalId, NO_ERROR};
use record_format::{BatchBuilder, RecordBatch};

use super::{Client, World, TRANSACTION_TIMEOUT_MS};
use crate::logview::committed_records;
use crate::script::{AppPolicy, ClientKind};
use crate::truth::{Status, CLIENT_HEADER, RECORD_HEADER, SOURCE_HEADER};
use crate::SimError;

pub(super) fn protocol_string(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

pub(super) fn protocol_transactional_id(id: &TransactionalId) -> kafka_protocol::messages::TransactionalId {
    kafka_protocol::messages::TransactionalId(protocol_string(&id.0))
}

/// An answer's error code as the client reads it.
pub(super) fn answer(code: i16) -> Result<(), KafkaError> {
    if code == NO_ERROR {
        Ok(())
    } else {
        Err(KafkaError::from_code(code).unwrap_or(KafkaError::UnknownServerError))
    }
}

impl World {
    pub(super) async fn connect(
        &mut self,
        name: &str,
        cluster: &str,
        topic: &str,
        kind: &ClientKind,
    ) -> Result<(), SimError> {
        if self.clients.contains_key(name) || !self.ensure_partition(cluster, topic).await? {
            return Ok(());
        }
        if let ClientKind::App { input, .. } = kind {
            self.ensure_partition(cluster, input).await?;
        }
        let client = Client {
            cluster: cluster.to_owned(),
            topic: topic.to_owned(),
            kind: kind.clone(),
            producer: None,
            sequences: std::collections::BTreeMap::new(),
            partition: 0,
            pending: None,
            last_refusal: None,
            in_txn: false,
            txn_partitions: std::collections::BTreeSet::new(),
            txn_records: Vec::new(),
            dead: None,
            offsets_in_txn: false,
            position: 0,
            read_position: 0,
            recoveries: 0,
        };
        self.clients.insert(name.to_owned(), client);
        self.init_producer(name).await
    }

    /// InitProducerId at the client's cluster (retrying while the coordinator completes an older transaction).
    pub(super) async fn init_producer(&mut self, name: &str) -> Result<(), SimError> {
        let Some(client) = self.clients.get(name).cloned() else {
            return Ok(());
        };
        let tid = client.transactional_id();
        for _attempt in 0..3 {
            self.operations += 1;
            let Some(node) = self.node(&client.cluster) else {
                return Ok(());
            };
            let mut request = InitProducerIdRequest::default();
            request.transactional_id = tid.as_ref().map(protocol_transactional_id);
            request.transaction_timeout_ms = TRANSACTION_TIMEOUT_MS;
            request.producer_id = kafka_protocol::messages::ProducerId(-1);
            request.producer_epoch = -1;
            let response = node
                .init_producer_id(request, super::versions::INIT_PRODUCER_ID)
                .await;
            self.note_delivered_markers().await;
            let result = answer(response.error_code).map(|()| {
                (
                    ProducerId(response.producer_id.0),
                    ProducerEpoch(response.producer_epoch),
                )
            });
            match result {
                Ok(producer) => {
                    if let Some(client) = self.clients.get_mut(name) {
                        client.producer = Some(producer);
                        client.sequences.clear();
                        client.pending = None;
                        client.in_txn = false;
                    }
                    return Ok(());
                }
                Err(error) => self.heard(error),
            }
        }
        if let Some(client) = self.clients.get_mut(name) {
            client.producer = None;
        }
        Ok(())
    }

    pub(super) fn heard(&mut self, error: KafkaError) {
        *self.client_errors.entry(error.name().to_owned()).or_default() += 1;
    }

    pub(super) fn new_record_ids(
        &mut self,
        name: &str,
        topic: &str,
        count: usize,
        status: Status,
    ) -> Vec<u64> {
        (0..count)
            .map(|_| {
                self.next_record += 1;
                self.truth.records.insert(
                    self.next_record,
                    crate::truth::RecordTruth {
                        client: name.to_owned(),
                        topic: topic.to_owned(),
                        status,
                        acked_on: None,
                    },
                );
                self.next_record
            })
            .collect()
    }

    pub(super) async fn produce(&mut self, name: &str, records: u8, lose_ack: bool) -> Result<(), SimError> {
        let Some(client) = self.clients.get(name).cloned() else {
            return Ok(());
        };
        if client.dead.is_some() {
            return Ok(());
        }
        if client.producer.is_none() {
            self.init_producer(name).await?;
        }
        if let ClientKind::App { input, policy, .. } = &client.kind {
            return self.app_round(name, input, *policy, records).await;
        }
        let transactional = client.transactional_id().is_some();
        if transactional && !self.begin_txn(name).await? {
            return Ok(());
        }
        let Some(client) = self.clients.get(name).cloned() else {
            return Ok(());
        };
        let Some((producer_id, epoch)) = client.producer else {
            return Ok(());
        };
        let (batch, ids) = match client.pending.clone() {
            Some(pending) => pending,
            None => {
                let status = if transactional {
                    Status::Open
                } else {
                    Status::Plain
                };
                let partition = self.log_name(&client.topic, client.partition);
                let ids = self.new_record_ids(name, &partition, usize::from(records.max(1)), status);
                let sequence = client.sequences.get(&client.partition).copied().unwrap_or(0);
                let batch =
                    self.build_batch(name, (producer_id, epoch), sequence, transactional, &ids, &[])?;
                if let Some(client) = self.clients.get_mut(name) {
                    client
                        .sequences
                        .insert(client.partition, sequence.wrapping_add(ids.len() as i32));
                }
                (batch, ids)
            }
        };
        self.send(name, batch, ids, lose_ack).await
    }

    pub(super) fn build_batch(
        &self,
        name: &str,
        producer: (ProducerId, ProducerEpoch),
        sequence: i32,
        transactional: bool,
        ids: &[u64],
        sources: &[u64],
    ) -> Result<RecordBatch, SimError> {
        let mut builder = BatchBuilder::new()
            .producer(producer.0.get(), producer.1.get(), sequence)
            .transactional(transactional);
        for (index, id) in ids.iter().enumerate() {
            let rid = id.to_string();
            let src = sources.get(index).map(ToString::to_string);
            let mut headers: Vec<(&str, Option<&[u8]>)> = vec![
                (CLIENT_HEADER, Some(name.as_bytes())),
                (RECORD_HEADER, Some(rid.as_bytes())),
            ];
            if let Some(src) = &src {
                headers.push((SOURCE_HEADER, Some(src.as_bytes())));
            }
            builder.add(
                self.now(),
                None,
                Some(format!("record {id}").as_bytes()),
                &headers,
            );
        }
        builder
            .build()
            .map_err(|error| SimError::Setup(error.to_string()))
    }

    /// Sends a batch to the client's partition leader and acts on the answer.
    pub(super) async fn send(
        &mut self,
        name: &str,
        batch: RecordBatch,
        ids: Vec<u64>,
        lose_ack: bool,
    ) -> Result<(), SimError> {
        let Some(client) = self.clients.get(name).cloned() else {
            return Ok(());
        };
        self.operations += 1;
        let partition_name = self.log_name(&client.topic, client.partition);
        self.senders
            .entry((client.cluster.clone(), partition_name, batch.producer_id()))
            .or_default()
            .insert(name.to_owned());
        let transactional = client.transactional_id().is_some();
        let partitions = self
            .partition_numbers(&client.cluster, &client.topic)
            .await
            .end
            .max(1);
        let Some(node) = self.node(&client.cluster) else {
            return Ok(());
        };
        let mut partition = PartitionProduceData::default();
        partition.index = client.partition;
        partition.records = Some(batch.as_bytes().clone());
        let mut topic = TopicProduceData::default();
        topic.name = TopicName(protocol_string(&client.topic));
        topic.partition_data = vec![partition];
        let mut request = ProduceRequest::default();
        request.transactional_id = client.transactional_id().as_ref().map(protocol_transactional_id);
        request.acks = -1;
        request.timeout_ms = 30_000;
        request.topic_data = vec![topic];
        let response = node.produce(request, super::versions::PRODUCE).await;
        let code = response
            .responses
            .first()
            .and_then(|topic| topic.partition_responses.first())
            .map_or(KafkaError::UnknownServerError.code(), |partition| {
                partition.error_code
            });
        match answer(code) {
            Ok(_) => {
                let Some(entry) = self.clients.get_mut(name) else {
                    return Ok(());
                };
                if lose_ack {
                    entry.pending = Some((batch, ids));
                } else {
                    entry.pending = None;
                    // Acknowledged: a producer's next batch goes to the next partition (an application stays on
                    // partition 0).
                    if !matches!(entry.kind, ClientKind::App { .. }) {
                        entry.partition = (entry.partition + 1) % partitions;
                    }
                    if transactional {
                        entry.txn_records.extend(ids);
                    } else {
                        let cluster = entry.cluster.clone();
                        self.truth.settle(&ids, Status::Plain, Some(&cluster));
                    }
                }
            }
            Err(kafka) => {
                self.heard(kafka);
                if let Some(entry) = self.clients.get_mut(name) {
                    entry.last_refusal = Some(kafka);
                }
                // Retriable errors are retried by the client with the same batch; an application writing to a
                // mirror holds its batch until a failover makes the partition writable, then sends it again.
                let retriable =
                    kafka.client_class() == ClientErrorClass::Retriable || kafka == KafkaError::ReadOnlyTopic;
                if let Some(entry) = self.clients.get_mut(name) {
                    // Retriable: the same batch goes again next time.
                    entry.pending = retriable.then_some((batch, ids.clone()));
                }
                if retriable {
                    return Ok(());
                }
                if transactional {
                    self.truth.settle(&ids, Status::Aborted, None);
                    self.fail_transactional(name, kafka).await?;
                } else {
                    // The producer is refused: the application creates a new one (a new producer id).
                    self.init_producer(name).await?;
                }
            }
        }
        Ok(())
    }

    /// Adds the client's partition to its transaction (AddPartitionsToTxn), opening one unless one is open and
    /// holds the partition already; false when the client cannot go on now.
    pub(super) async fn begin_txn(&mut self, name: &str) -> Result<bool, SimError> {
        let Some(client) = self.clients.get(name).cloned() else {
            return Ok(false);
        };
        if client.in_txn && client.txn_partitions.contains(&client.partition) {
            return Ok(true);
        }
        let (Some(tid), Some((producer_id, epoch))) = (client.transactional_id(), client.producer) else {
            return Ok(false);
        };
        self.operations += 1;
        let Some(node) = self.node(&client.cluster) else {
            return Ok(false);
        };
        let mut topic = AddPartitionsToTxnTopic::default();
        topic.name = TopicName(protocol_string(&client.topic));
        topic.partitions = vec![client.partition];
        let mut request = AddPartitionsToTxnRequest::default();
        request.v3_and_below_transactional_id = protocol_transactional_id(&tid);
        request.v3_and_below_producer_id = kafka_protocol::messages::ProducerId(producer_id.get());
        request.v3_and_below_producer_epoch = epoch.get();
        request.v3_and_below_topics = vec![topic];
        let response = node
            .add_partitions_to_txn(request, super::versions::ADD_PARTITIONS_TO_TXN)
            .await;
        self.note_delivered_markers().await;
        let code = response
            .results_by_topic_v3_and_below
            .first()
            .and_then(|topic| topic.results_by_partition.first())
            .map_or(KafkaError::UnknownServerError.code(), |partition| {
                partition.partition_error_code
            });
        match answer(code) {
            Ok(()) => {
                self.txn_owners.insert(tid, name.to_owned());
                if let Some(client) = self.clients.get_mut(name) {
                    if !client.in_txn {
                        client.in_txn = true;
                        client.offsets_in_txn = false;
                        client.txn_records.clear();
                        client.txn_partitions.clear();
                    }
                    client.txn_partitions.insert(client.partition);
                }
                Ok(true)
            }
            Err(error) => {
                self.heard(error);
                self.fail_transactional(name, error).await?;
                Ok(false)
            }
        }
    }

    /// What a transactional producer or an application does with a refusal (kafka-semantics §9).
    pub(super) async fn fail_transactional(&mut self, name: &str, error: KafkaError) -> Result<(), SimError> {
        let Some(client) = self.clients.get(name).cloned() else {
            return Ok(());
        };
        let class = error.client_class();
        if class == ClientErrorClass::Retriable {
            // Back off and try again at the next step (CONCURRENT_TRANSACTIONS, a busy partition).
            return Ok(());
        }
        // A fenced producer, or one that cannot continue, is replaced by a new instance.
        let fatal = matches!(class, ClientErrorClass::Fenced | ClientErrorClass::Fatal);
        if let ClientKind::App { policy, .. } = client.kind {
            if error == KafkaError::InvalidProducerIdMapping && policy == AppPolicy::Pre16699 {
                self.truth.settle(&client.txn_records, Status::Aborted, None);
                if let Some(client) = self.clients.get_mut(name) {
                    client.dead = Some(error.name().to_owned());
                    client.in_txn = false;
                    client.txn_records.clear();
                }
                return Ok(());
            }
        }
        if fatal {
            // Close dirty: the open transaction is lost; a new producer instance fences the old one.
            self.truth.settle(&client.txn_records, Status::Aborted, None);
            if let Some(client) = self.clients.get_mut(name) {
                client.in_txn = false;
                client.txn_records.clear();
                client.recoveries += 1;
            }
            self.init_producer(name).await?;
            return self.restore_position(name).await;
        }
        // Abortable: abort the transaction and carry on (boxed: aborting can be refused in turn).
        Box::pin(self.end_txn(name, false)).await
    }

    pub(super) async fn end_txn(&mut self, name: &str, commit: bool) -> Result<(), SimError> {
        let Some(client) = self.clients.get(name).cloned() else {
            return Ok(());
        };
        if client.dead.is_some() || !client.in_txn {
            return Ok(());
        }
        let (Some(tid), Some((producer_id, epoch))) = (client.transactional_id(), client.producer) else {
            return Ok(());
        };
        // A producer flushes before it commits: a batch whose acknowledgement was lost goes again.
        if let Some((batch, ids)) = client.pending.clone() {
            self.send(name, batch, ids, false).await?;
        }
        let Some(client) = self.clients.get(name).cloned() else {
            return Ok(());
        };
        if !client.in_txn {
            return Ok(());
        }
        self.operations += 1;
        let Some(node) = self.node(&client.cluster) else {
            return Ok(());
        };
        let mut request = EndTxnRequest::default();
        request.transactional_id = protocol_transactional_id(&tid);
        request.producer_id = kafka_protocol::messages::ProducerId(producer_id.get());
        request.producer_epoch = epoch.get();
        request.committed = commit;
        let response = node.end_txn(request, super::versions::END_TXN).await;
        self.note_delivered_markers().await;
        match answer(response.error_code) {
            Ok(_) => {
                let status = if commit {
                    Status::Committed
                } else {
                    Status::Aborted
                };
                let acked_on = commit.then_some(client.cluster.as_str());
                self.truth.settle(&client.txn_records, status, acked_on);
                if let Some(entry) = self.clients.get_mut(name) {
                    entry.in_txn = false;
                    entry.txn_records.clear();
                    if commit {
                        entry.position = entry.read_position;
                    } else {
                        entry.read_position = entry.position;
                    }
                }
                Ok(())
            }
            Err(error) => {
                self.heard(error);
                if error == KafkaError::ConcurrentTransactions {
                    return Ok(());
                }
                if matches!(error, KafkaError::InvalidTxnState) || !commit {
                    // Nothing more to end: the transaction is gone.
                    self.truth.settle(&client.txn_records, Status::Aborted, None);
                    if let Some(entry) = self.clients.get_mut(name) {
                        entry.in_txn = false;
                        entry.txn_records.clear();
                        entry.read_position = entry.position;
                    }
                    if matches!(error, KafkaError::InvalidTxnState) {
                        return Ok(());
                    }
                }
                self.fail_transactional(name, error).await
            }
        }
    }

    /// One consume-transform-produce round of an application: read up to `records` input records
    /// read_committed from its position, write one output record per input record in its transaction.
    pub(super) async fn app_round(
        &mut self,
        name: &str,
        input: &str,
        _policy: AppPolicy,
        records: u8,
    ) -> Result<(), SimError> {
        if !self.begin_txn(name).await? {
            return Ok(());
        }
        let Some(client) = self.clients.get(name).cloned() else {
            return Ok(());
        };
        let Some(producer) = client.producer else {
            return Ok(());
        };
        let Ok(input_slot) = self.leader(&client.cluster, input, 0).await else {
            return Ok(());
        };
        let visible = {
            let guard = input_slot.lock().await;
            match guard.as_ref() {
                Some(replicas) => committed_records(&replicas.leader, client.read_position).await?,
                None => return Ok(()),
            }
        };
        let taken: Vec<(i64, u64)> = visible.into_iter().take(usize::from(records.max(1))).collect();
        let Some(&(last_offset, _)) = taken.last() else {
            return Ok(());
        };
        let sources: Vec<u64> = taken.iter().map(|&(_, id)| id).collect();
        let output = self.log_name(&client.topic, 0);
        let ids = self.new_record_ids(name, &output, sources.len(), Status::Open);
        let sequence = client.sequences.get(&0).copied().unwrap_or(0);
        let batch = self.build_batch(name, producer, sequence, true, &ids, &sources)?;
        if let Some(entry) = self.clients.get_mut(name) {
            entry.sequences.insert(0, sequence.wrapping_add(ids.len() as i32));
            entry.read_position = last_offset + 1;
        }
        self.send(name, batch, ids, false).await?;
        self.commit_input_offset(name).await
    }

    pub(super) async fn move_client(
        &mut self,
        name: &str,
        cluster: &str,
        keep_ids: bool,
    ) -> Result<(), SimError> {
        if !self.clusters.contains_key(cluster) {
            return Ok(());
        }
        let Some(client) = self.clients.get(name).cloned() else {
            return Ok(());
        };
        self.ensure_partition(cluster, &client.topic).await?;
        if let ClientKind::App { input, .. } = &client.kind {
            self.ensure_partition(cluster, input).await?;
        }
        // The open transaction stays behind on the lost cluster: it is never committed.
        self.truth.settle(&client.txn_records, Status::Aborted, None);
        let transactional = client.transactional_id().is_some();
        if let Some(entry) = self.clients.get_mut(name) {
            entry.cluster = cluster.to_owned();
            entry.in_txn = false;
            entry.txn_records.clear();
            entry.read_position = entry.position;
            if transactional {
                entry.pending = None;
            }
            if !keep_ids {
                entry.producer = None;
                entry.pending = None;
            }
        }
        // Its next batch goes to a partition the topic has there: a failover may have come before the link met a
        // partition the old cluster added (a batch waiting for its acknowledgement keeps its partition).
        let count = self.partition_numbers(cluster, &client.topic).await.end.max(1);
        if let Some(entry) = self.clients.get_mut(name) {
            if entry.pending.is_none() && entry.partition >= count {
                entry.partition %= count;
            }
        }
        if !keep_ids {
            self.init_producer(name).await?;
        }
        self.restore_position(name).await
    }
}
