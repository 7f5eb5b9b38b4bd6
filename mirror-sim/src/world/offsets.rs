//! Applications' committed input positions as the cluster holds them: an application commits its input offset
//! inside its transaction (AddOffsetsToTxn, TxnOffsetCommit), reads it back with OffsetFetch when it resumes after
//! a crash or on another cluster. The links copy each group's committed offsets with the data (KIP-1279 mirrors
//! consumer-group offsets): the node's own offset sync (`node::mirror::groups`), here at every fetch round.

use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, GroupId, OffsetFetchRequest, ProducerId, TopicName, TxnOffsetCommitRequest,
};
use kafka_types::NO_ERROR;

use super::clients::{answer, protocol_string as text, protocol_transactional_id};
use super::World;
use crate::script::ClientKind;
use crate::SimError;

impl World {
    /// An application's group (its transactional id) and input topic; `None` for other clients.
    fn app_group(&self, name: &str) -> Option<(String, String)> {
        match &self.clients.get(name)?.kind {
            ClientKind::App {
                transactional_id,
                input,
                ..
            } => Some((transactional_id.clone(), input.clone())),
            _ => None,
        }
    }

    /// Inside the application's open transaction: its input offset up to what it read (AddOffsetsToTxn once per
    /// transaction, then TxnOffsetCommit). A refusal goes to the transactional error policy.
    pub(super) async fn commit_input_offset(&mut self, name: &str) -> Result<(), SimError> {
        let Some((group, input)) = self.app_group(name) else {
            return Ok(());
        };
        let Some(client) = self.clients.get(name).cloned() else {
            return Ok(());
        };
        let (Some(tid), Some((producer_id, epoch))) = (client.transactional_id(), client.producer) else {
            return Ok(());
        };
        if !client.in_txn || client.dead.is_some() {
            return Ok(());
        }
        let transactional_id = protocol_transactional_id(&tid);
        if !client.offsets_in_txn {
            self.operations += 1;
            let Some(node) = self.node(&client.cluster) else {
                return Ok(());
            };
            let mut request = AddOffsetsToTxnRequest::default();
            request.transactional_id = transactional_id.clone();
            request.producer_id = ProducerId(producer_id.get());
            request.producer_epoch = epoch.get();
            request.group_id = GroupId(text(&group));
            let response = node
                .add_offsets_to_txn(request, super::versions::ADD_OFFSETS_TO_TXN)
                .await;
            if let Err(error) = answer(response.error_code) {
                self.heard(error);
                return self.fail_transactional(name, error).await;
            }
            if let Some(entry) = self.clients.get_mut(name) {
                entry.offsets_in_txn = true;
            }
        }
        self.operations += 1;
        let Some(node) = self.node(&client.cluster) else {
            return Ok(());
        };
        let mut partition = TxnOffsetCommitRequestPartition::default();
        partition.partition_index = 0;
        partition.committed_offset = client.read_position;
        let mut topic = TxnOffsetCommitRequestTopic::default();
        topic.name = TopicName(text(&input));
        topic.partitions = vec![partition];
        let mut request = TxnOffsetCommitRequest::default();
        request.transactional_id = transactional_id;
        request.group_id = GroupId(text(&group));
        request.producer_id = ProducerId(producer_id.get());
        request.producer_epoch = epoch.get();
        request.generation_id = -1;
        request.topics = vec![topic];
        let response = node
            .txn_offset_commit(request, super::versions::TXN_OFFSET_COMMIT)
            .await;
        let code = response
            .topics
            .iter()
            .flat_map(|topic| &topic.partitions)
            .map(|partition| partition.error_code)
            .find(|code| *code != NO_ERROR)
            .unwrap_or(NO_ERROR);
        if let Err(error) = answer(code) {
            self.heard(error);
            return self.fail_transactional(name, error).await;
        }
        Ok(())
    }

    /// The offset of `group` for partition 0 of `topic` that `cluster` holds as committed (`None`: none).
    pub(super) async fn committed_offset(&self, cluster: &str, group: &str, topic: &str) -> Option<i64> {
        let node = self.node(cluster)?;
        let mut wanted = OffsetFetchRequestTopic::default();
        wanted.name = TopicName(text(topic));
        wanted.partition_indexes = vec![0];
        let mut request = OffsetFetchRequest::default();
        request.group_id = GroupId(text(group));
        request.topics = Some(vec![wanted]);
        let response = node.offset_fetch(request, super::versions::OFFSET_FETCH).await;
        response
            .topics
            .iter()
            .flat_map(|topic| &topic.partitions)
            .find(|partition| partition.partition_index == 0 && partition.error_code == NO_ERROR)
            .map(|partition| partition.committed_offset)
            .filter(|offset| *offset >= 0)
    }

    /// An application that resumes (a new producer instance, or on another cluster) reads its committed input
    /// position from its cluster: from the start of its input when the cluster holds none.
    pub(super) async fn restore_position(&mut self, name: &str) -> Result<(), SimError> {
        let Some((group, input)) = self.app_group(name) else {
            return Ok(());
        };
        let Some(cluster) = self.clients.get(name).map(|client| client.cluster.clone()) else {
            return Ok(());
        };
        self.operations += 1;
        let position = self.committed_offset(&cluster, &group, &input).await.unwrap_or(0);
        if let Some(entry) = self.clients.get_mut(name) {
            entry.position = position;
            entry.read_position = position;
        }
        Ok(())
    }
}
