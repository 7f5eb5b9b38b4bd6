//! The Kafka error codes in a response, counted for `mirrorlog_request_errors_total` (Kafka's
//! `RequestMetrics` `ErrorsPerSec`, which counts each response's `errorCounts()`).
//!
//! Every response the broker sends implements [`ResponseErrors`]: the frame encoder requires it, so a new API
//! cannot be served without saying where its answer carries error codes. A code is counted once per place it
//! appears — a Produce answer refusing three partitions counts three — as Kafka counts them. Unlike Kafka,
//! `NONE` (0) is not counted: `mirrorlog_requests_total` counts the requests, and a line per API for success
//! would double the series for no information.

use kafka_protocol::messages::*;

/// The error codes of an answer, with how often each appears; empty (and unallocated) when it has none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErrorCounts(Vec<(i16, u32)>);

impl ErrorCounts {
    /// The codes other than `NONE` in `response`.
    pub fn of<M: ResponseErrors>(response: &M) -> Self {
        let mut counts = ErrorCounts::default();
        response.each_error_code(&mut |code| counts.add(code));
        counts
    }

    fn add(&mut self, code: i16) {
        if code == 0 {
            return;
        }
        match self.0.iter_mut().find(|(seen, _)| *seen == code) {
            Some((_, count)) => *count = count.saturating_add(1),
            None => self.0.push((code, 1)),
        }
    }

    /// Each code, and how often it appears.
    pub fn iter(&self) -> impl Iterator<Item = (i16, u32)> + '_ {
        self.0.iter().copied()
    }
}

/// Where a response carries Kafka error codes.
pub trait ResponseErrors {
    /// Calls `seen` with every error code in the response (`NONE` included; [`ErrorCounts`] leaves it out).
    fn each_error_code(&self, seen: &mut dyn FnMut(i16));
}

/// `impl ResponseErrors` for a response: `errors!(Type, |response, seen| body)`.
macro_rules! errors {
    ($($response:ty => |$message:ident, $seen:ident| $body:expr;)+) => {
        $(impl ResponseErrors for $response {
            fn each_error_code(&self, $seen: &mut dyn FnMut(i16)) {
                let $message = self;
                $body
            }
        })+
    };
}

errors! {
    ApiVersionsResponse => |r, seen| seen(r.error_code);
    MetadataResponse => |r, seen| {
        seen(r.error_code);
        for topic in &r.topics {
            seen(topic.error_code);
            topic.partitions.iter().for_each(|p| seen(p.error_code));
        }
    };
    CreateTopicsResponse => |r, seen| r.topics.iter().for_each(|t| seen(t.error_code));
    FindCoordinatorResponse => |r, seen| {
        seen(r.error_code);
        r.coordinators.iter().for_each(|c| seen(c.error_code));
    };
    ProduceResponse => |r, seen| {
        for topic in &r.responses {
            topic.partition_responses.iter().for_each(|p| seen(p.error_code));
        }
    };
    FetchResponse => |r, seen| {
        seen(r.error_code);
        for topic in &r.responses {
            topic.partitions.iter().for_each(|p| seen(p.error_code));
        }
    };
    ListOffsetsResponse => |r, seen| {
        for topic in &r.topics {
            topic.partitions.iter().for_each(|p| seen(p.error_code));
        }
    };
    OffsetCommitResponse => |r, seen| {
        for topic in &r.topics {
            topic.partitions.iter().for_each(|p| seen(p.error_code));
        }
    };
    OffsetFetchResponse => |r, seen| {
        seen(r.error_code);
        for topic in &r.topics {
            topic.partitions.iter().for_each(|p| seen(p.error_code));
        }
        for group in &r.groups {
            seen(group.error_code);
            for topic in &group.topics {
                topic.partitions.iter().for_each(|p| seen(p.error_code));
            }
        }
    };
    JoinGroupResponse => |r, seen| seen(r.error_code);
    SyncGroupResponse => |r, seen| seen(r.error_code);
    HeartbeatResponse => |r, seen| seen(r.error_code);
    LeaveGroupResponse => |r, seen| {
        seen(r.error_code);
        r.members.iter().for_each(|m| seen(m.error_code));
    };
    DescribeGroupsResponse => |r, seen| r.groups.iter().for_each(|g| seen(g.error_code));
    ListGroupsResponse => |r, seen| seen(r.error_code);
    DeleteGroupsResponse => |r, seen| r.results.iter().for_each(|g| seen(g.error_code));
    TxnOffsetCommitResponse => |r, seen| {
        for topic in &r.topics {
            topic.partitions.iter().for_each(|p| seen(p.error_code));
        }
    };
    InitProducerIdResponse => |r, seen| seen(r.error_code);
    AddPartitionsToTxnResponse => |r, seen| {
        seen(r.error_code);
        let topics = r
            .results_by_topic_v3_and_below
            .iter()
            .chain(r.results_by_transaction.iter().flat_map(|txn| txn.topic_results.iter()));
        for topic in topics {
            topic.results_by_partition.iter().for_each(|p| seen(p.partition_error_code));
        }
    };
    AddOffsetsToTxnResponse => |r, seen| seen(r.error_code);
    EndTxnResponse => |r, seen| seen(r.error_code);
    WriteTxnMarkersResponse => |r, seen| {
        for marker in &r.markers {
            for topic in &marker.topics {
                topic.partitions.iter().for_each(|p| seen(p.error_code));
            }
        }
    };
    DeleteRecordsResponse => |r, seen| {
        for topic in &r.topics {
            topic.partitions.iter().for_each(|p| seen(p.error_code));
        }
    };
    DescribeConfigsResponse => |r, seen| r.results.iter().for_each(|c| seen(c.error_code));
    AlterConfigsResponse => |r, seen| r.responses.iter().for_each(|c| seen(c.error_code));
    IncrementalAlterConfigsResponse => |r, seen| r.responses.iter().for_each(|c| seen(c.error_code));
    DeleteTopicsResponse => |r, seen| r.responses.iter().for_each(|t| seen(t.error_code));
    CreatePartitionsResponse => |r, seen| r.results.iter().for_each(|t| seen(t.error_code));
    DescribeClusterResponse => |r, seen| seen(r.error_code);
    DescribeLogDirsResponse => |r, seen| {
        seen(r.error_code);
        r.results.iter().for_each(|d| seen(d.error_code));
    };
    OffsetDeleteResponse => |r, seen| {
        seen(r.error_code);
        for topic in &r.topics {
            topic.partitions.iter().for_each(|p| seen(p.error_code));
        }
    };
    DescribeProducersResponse => |r, seen| {
        for topic in &r.topics {
            topic.partitions.iter().for_each(|p| seen(p.error_code));
        }
    };
    ListTransactionsResponse => |r, seen| seen(r.error_code);
    DescribeTransactionsResponse => |r, seen| r.transaction_states.iter().for_each(|t| seen(t.error_code));
    SaslHandshakeResponse => |r, seen| seen(r.error_code);
    SaslAuthenticateResponse => |r, seen| seen(r.error_code);
    DescribeUserScramCredentialsResponse => |r, seen| {
        seen(r.error_code);
        r.results.iter().for_each(|u| seen(u.error_code));
    };
    AlterUserScramCredentialsResponse => |r, seen| r.results.iter().for_each(|u| seen(u.error_code));
    DescribeAclsResponse => |r, seen| seen(r.error_code);
    CreateAclsResponse => |r, seen| r.results.iter().for_each(|a| seen(a.error_code));
    DeleteAclsResponse => |r, seen| {
        for filter in &r.filter_results {
            seen(filter.error_code);
            filter.matching_acls.iter().for_each(|a| seen(a.error_code));
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_each_partition_error_once_and_leaves_none_out() {
        let mut response = ProduceResponse::default();
        let mut topic = produce_response::TopicProduceResponse::default();
        for code in [0, 3, 3, 6] {
            let mut partition = produce_response::PartitionProduceResponse::default();
            partition.error_code = code;
            topic.partition_responses.push(partition);
        }
        response.responses.push(topic);
        let counts: Vec<(i16, u32)> = ErrorCounts::of(&response).iter().collect();
        assert_eq!(counts, vec![(3, 2), (6, 1)]);
    }

    #[test]
    fn an_answer_without_errors_counts_nothing() {
        assert_eq!(
            ErrorCounts::of(&HeartbeatResponse::default()),
            ErrorCounts::default()
        );
    }

    #[test]
    fn a_group_level_error_of_offset_fetch_counts() {
        let mut response = OffsetFetchResponse::default();
        let mut group = offset_fetch_response::OffsetFetchResponseGroup::default();
        group.error_code = 30;
        response.groups.push(group);
        assert_eq!(
            ErrorCounts::of(&response).iter().collect::<Vec<_>>(),
            vec![(30, 1)]
        );
    }
}
