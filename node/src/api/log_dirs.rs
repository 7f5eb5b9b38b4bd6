//! DescribeLogDirs (`kafka-log-dirs --describe`): the node's one log directory — the storage's data directory —
//! with the size of each partition asked for (all when the request names none), its lag of the log end behind
//! the high watermark, and the size and free space of the volume holding it (v4). Kafka lists its internal
//! topics too; the node's internal logs (offsets, transactions, topic configs) are not topics and are not
//! listed. A topic or partition the node does not have is left out, as Kafka leaves it out.

use std::collections::BTreeMap;

use kafka_protocol::messages::*;

use super::str_bytes;
use crate::node::Node;

/// DescribeLogDirs.
pub async fn describe_log_dirs(
    node: &Node,
    request: DescribeLogDirsRequest,
    _version: i16,
) -> DescribeLogDirsResponse {
    let wanted: Option<BTreeMap<String, Vec<i32>>> = request.topics.map(|topics| {
        topics
            .into_iter()
            .map(|topic| (topic.topic.to_string(), topic.partitions))
            .collect()
    });
    let topics = node.topic_slots().await;
    let mut result = describe_log_dirs_response::DescribeLogDirsResult::default();
    for (name, slots) in topics {
        let asked = match &wanted {
            Some(wanted) => match wanted.get(&name) {
                Some(partitions) => Some(partitions),
                None => continue,
            },
            None => None,
        };
        let mut topic = describe_log_dirs_response::DescribeLogDirsTopic::default();
        for (index, slot) in slots.iter().enumerate() {
            let Ok(partition_index) = i32::try_from(index) else {
                break;
            };
            if asked.is_some_and(|partitions| !partitions.contains(&partition_index)) {
                continue;
            }
            let guard = slot.lock().await;
            let Some(replicas) = guard.as_ref() else { continue };
            let log = &replicas.leader;
            let Ok(size) = log.size_bytes().await else {
                continue;
            };
            let mut partition = describe_log_dirs_response::DescribeLogDirsPartition::default();
            partition.partition_index = partition_index;
            partition.partition_size = i64::try_from(size).unwrap_or(i64::MAX);
            partition.offset_lag = (log.log_end_offset() - log.high_watermark()).max(0);
            partition.is_future_key = false;
            topic.partitions.push(partition);
        }
        if !topic.partitions.is_empty() {
            topic.name = TopicName(str_bytes(&name));
            result.topics.push(topic);
        }
    }
    let directory = node.config().storage.data_dir().map(std::path::Path::to_path_buf);
    result.log_dir = str_bytes(&match &directory {
        Some(path) => std::path::absolute(path)
            .unwrap_or_else(|_| path.clone())
            .display()
            .to_string(),
        None => "memory".to_owned(),
    });
    (result.total_bytes, result.usable_bytes) = directory.as_deref().map_or((-1, -1), volume_bytes);
    let mut response = DescribeLogDirsResponse::default();
    response.results = vec![result];
    response
}

/// The total and usable bytes of the volume holding `path` (−1 each when unknown, Kafka's "unknown").
#[cfg(unix)]
fn volume_bytes(path: &std::path::Path) -> (i64, i64) {
    match rustix::fs::statvfs(path) {
        Ok(stats) => {
            let bytes =
                |blocks: u64| i64::try_from(blocks.saturating_mul(stats.f_frsize)).unwrap_or(i64::MAX);
            (bytes(stats.f_blocks), bytes(stats.f_bavail))
        }
        Err(_) => (-1, -1),
    }
}

/// The total and usable bytes of the volume holding `path`: unknown (−1) off Unix.
#[cfg(not(unix))]
fn volume_bytes(_path: &std::path::Path) -> (i64, i64) {
    (-1, -1)
}
