//! Produce: versions, acks, codecs, refusals, and the idempotent producer's sequence rules.

use kafka_protocol::messages::*;
use record_format::Compression;
use serde_json::json;

use super::{
    ask, create_topic, fresh_topic, idempotent_producer, init_transactional, produce_at, produce_observed,
    produce_plain, read_back, top, versions,
};
use crate::error::DiffError;
use crate::observe;
use crate::requests::{self, BatchSpec};
use crate::session::Session;

pub async fn produce_every_version(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    for version in versions(ApiKey::Produce) {
        let spec = BatchSpec::plain(&format!("v{version}"), 3);
        produce_at(
            session,
            &format!("v{version}"),
            version,
            None,
            vec![(&topic, 0, spec)],
        )
        .await?;
    }
    read_back(session, &topic, 1).await
}

pub async fn produce_acks(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    let request = requests::produce(None, 0, vec![(&topic, 0, BatchSpec::plain("acks0", 2).build()?)]);
    session
        .send_only(ApiKey::Produce, top(ApiKey::Produce), &request)
        .await?;
    for acks in [1, -1] {
        let request = requests::produce(
            None,
            acks,
            vec![(&topic, 0, BatchSpec::plain(&format!("acks{acks}"), 2).build()?)],
        );
        let answer: ProduceResponse = ask(session, ApiKey::Produce, &request).await?;
        session.observe(&format!("acks {acks}"), observe::produce(&answer));
    }
    read_back(session, &topic, 1).await
}

pub async fn produce_codecs(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    for compression in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let mut spec = BatchSpec::plain(&format!("{compression:?}"), 6);
        spec.compression = compression;
        produce_observed(
            session,
            &format!("{compression:?}"),
            None,
            vec![(&topic, 0, spec)],
        )
        .await?;
    }
    read_back(session, &topic, 1).await
}

pub async fn produce_unknown_topic_and_partition(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    let missing = session.topic("missing");
    produce_observed(
        session,
        "unknown topic, unknown partition, known partition",
        None,
        vec![
            (&missing, 0, BatchSpec::plain("a", 1)),
            (&topic, 7, BatchSpec::plain("b", 1)),
            (&topic, 0, BatchSpec::plain("c", 1)),
        ],
    )
    .await?;
    read_back(session, &topic, 1).await
}

pub async fn produce_corrupt_crc(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    let mut corrupt = BatchSpec::plain("corrupt", 2).build()?.to_vec();
    if let Some(last) = corrupt.last_mut() {
        *last ^= 0xff;
    }
    let request = requests::produce(None, -1, vec![(&topic, 0, bytes::Bytes::from(corrupt))]);
    let answer = session
        .call_or_closed::<_, ProduceResponse>(ApiKey::Produce, top(ApiKey::Produce), &request)
        .await?;
    session.observe(
        "corrupt",
        answer.map_or(json!("connection closed"), |a| observe::produce(&a)),
    );
    read_back(session, &topic, 1).await
}

pub async fn produce_oversized_batch(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    // Kafka's default message.max.bytes is 1,048,588 bytes (1 MiB plus the 12-byte log overhead).
    for (step, padding) in [("1.1 MiB batch", 1_150_000), ("900 KiB batch", 900_000)] {
        let mut spec = BatchSpec::plain("big", 1);
        spec.padding = padding;
        spec.compression = Compression::None;
        let request = requests::produce(None, -1, vec![(&topic, 0, spec.build()?)]);
        let answer = session
            .call_or_closed::<_, ProduceResponse>(ApiKey::Produce, top(ApiKey::Produce), &request)
            .await?;
        session.observe(
            step,
            answer.map_or(json!("connection closed"), |a| observe::produce(&a)),
        );
    }
    read_back(session, &topic, 1).await
}

pub async fn produce_control_batch(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    let request = requests::produce(None, -1, vec![(&topic, 0, requests::control_batch()?)]);
    let answer: ProduceResponse = ask(session, ApiKey::Produce, &request).await?;
    session.observe("control batch", observe::produce(&answer));
    read_back(session, &topic, 1).await
}

pub async fn produce_several_partitions(session: &mut Session) -> Result<(), DiffError> {
    let first = session.topic("a");
    let second = session.topic("b");
    create_topic(session, &first, 2).await?;
    create_topic(session, &second, 1).await?;
    let producer = idempotent_producer(session).await?;
    produce_observed(
        session,
        "three partitions",
        None,
        vec![
            (&first, 0, BatchSpec::plain("a0", 2).by(producer, 0)),
            (&first, 1, BatchSpec::plain("a1", 3).by(producer, 0)),
            (&second, 0, BatchSpec::plain("b0", 4).by(producer, 0)),
        ],
    )
    .await?;
    read_back(session, &first, 2).await?;
    read_back(session, &second, 1).await
}

pub async fn idempotent_duplicate(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    let producer = idempotent_producer(session).await?;
    produce_plain(session, "plain first", &topic, 0, "plain", 2).await?;
    produce_observed(
        session,
        "sequence 0",
        None,
        vec![(&topic, 0, BatchSpec::plain("s0", 3).by(producer, 0))],
    )
    .await?;
    produce_observed(
        session,
        "sequence 3",
        None,
        vec![(&topic, 0, BatchSpec::plain("s3", 2).by(producer, 3))],
    )
    .await?;
    produce_observed(
        session,
        "sequence 0 again",
        None,
        vec![(&topic, 0, BatchSpec::plain("s0", 3).by(producer, 0))],
    )
    .await?;
    produce_observed(
        session,
        "sequence 3 again",
        None,
        vec![(&topic, 0, BatchSpec::plain("s3", 2).by(producer, 3))],
    )
    .await?;
    produce_observed(
        session,
        "sequence 5",
        None,
        vec![(&topic, 0, BatchSpec::plain("s5", 1).by(producer, 5))],
    )
    .await?;
    read_back(session, &topic, 1).await
}

pub async fn idempotent_out_of_order(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    let producer = idempotent_producer(session).await?;
    produce_observed(
        session,
        "sequence 0",
        None,
        vec![(&topic, 0, BatchSpec::plain("s0", 2).by(producer, 0))],
    )
    .await?;
    produce_observed(
        session,
        "sequence 5 (gap)",
        None,
        vec![(&topic, 0, BatchSpec::plain("s5", 1).by(producer, 5))],
    )
    .await?;
    produce_observed(
        session,
        "sequence 2",
        None,
        vec![(&topic, 0, BatchSpec::plain("s2", 1).by(producer, 2))],
    )
    .await?;
    read_back(session, &topic, 1).await
}

pub async fn idempotent_first_sequence_not_zero(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    let producer = idempotent_producer(session).await?;
    produce_observed(
        session,
        "sequence 7 first",
        None,
        vec![(&topic, 0, BatchSpec::plain("s7", 1).by(producer, 7))],
    )
    .await?;
    read_back(session, &topic, 1).await
}

pub async fn idempotent_epoch_bump_then_stale(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    let (id, epoch) = idempotent_producer(session).await?;
    produce_observed(
        session,
        "epoch 0",
        None,
        vec![(&topic, 0, BatchSpec::plain("e0", 2).by((id, epoch), 0))],
    )
    .await?;
    produce_observed(
        session,
        "epoch 1, sequence 0",
        None,
        vec![(&topic, 0, BatchSpec::plain("e1", 2).by((id, epoch + 1), 0))],
    )
    .await?;
    produce_observed(
        session,
        "epoch 0 again",
        None,
        vec![(&topic, 0, BatchSpec::plain("e0b", 1).by((id, epoch), 2))],
    )
    .await?;
    produce_observed(
        session,
        "epoch 2, sequence 4",
        None,
        vec![(&topic, 0, BatchSpec::plain("e2", 1).by((id, epoch + 2), 4))],
    )
    .await?;
    read_back(session, &topic, 1).await
}

pub async fn idempotent_unknown_producer_id(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    let unissued = (987_654_321, 0);
    produce_observed(
        session,
        "sequence 0",
        None,
        vec![(&topic, 0, BatchSpec::plain("u0", 2).by(unissued, 0))],
    )
    .await?;
    produce_observed(
        session,
        "sequence 2",
        None,
        vec![(&topic, 0, BatchSpec::plain("u2", 2).by(unissued, 2))],
    )
    .await?;
    read_back(session, &topic, 1).await
}

pub async fn transactional_produce_not_added(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    let txn = session.transactional_id("txn");
    let producer = init_transactional(session, &txn, 60_000).await?;
    produce_observed(
        session,
        "transactional batch, partition not added",
        Some(&txn),
        vec![(
            &topic,
            0,
            BatchSpec::plain("t", 2).by(producer, 0).in_transaction(),
        )],
    )
    .await?;
    read_back(session, &topic, 1).await
}

pub async fn produce_two_batches_in_one_partition(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    let mut both = BatchSpec::plain("first", 2).build()?.to_vec();
    both.extend_from_slice(&BatchSpec::plain("second", 2).build()?);
    let request = requests::produce(None, -1, vec![(&topic, 0, bytes::Bytes::from(both))]);
    let answer: ProduceResponse = ask(session, ApiKey::Produce, &request).await?;
    session.observe("two batches", observe::produce(&answer));
    read_back(session, &topic, 1).await
}

pub async fn produce_without_records(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    // An empty record set; a null one is not compared (Kafka 4.1.2 leaves that request unanswered).
    let request = requests::produce(None, -1, vec![(&topic, 0, bytes::Bytes::new())]);
    let answer = session
        .call_or_closed::<_, ProduceResponse>(ApiKey::Produce, top(ApiKey::Produce), &request)
        .await?;
    session.observe(
        "empty",
        answer.map_or(json!("connection closed"), |a| observe::produce(&a)),
    );
    read_back(session, &topic, 1).await
}

pub async fn produce_invalid_acks(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    for acks in [2, -2] {
        let request = requests::produce(None, acks, vec![(&topic, 0, BatchSpec::plain("a", 1).build()?)]);
        let answer = session
            .call_or_closed::<_, ProduceResponse>(ApiKey::Produce, top(ApiKey::Produce), &request)
            .await?;
        session.observe(
            &format!("acks {acks}"),
            answer.map_or(json!("connection closed"), |a| observe::produce(&a)),
        );
    }
    read_back(session, &topic, 1).await
}

pub async fn produce_timestamps_far_from_now(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as i64);
    let hour = 3_600_000;
    for (step, timestamp) in [
        ("two hours ahead", now + 2 * hour),
        ("thirty years behind", now - 30 * 365 * 24 * hour),
    ] {
        let mut spec = BatchSpec::plain("when", 1);
        spec.base_timestamp = Some(timestamp);
        let request = requests::produce(None, -1, vec![(&topic, 0, spec.build()?)]);
        let answer: ProduceResponse = ask(session, ApiKey::Produce, &request).await?;
        session.observe(step, observe::produce(&answer));
    }
    // The records' own timestamps differ from run to run: what is compared is how many were stored.
    let request = requests::list_offsets(0, &[(&topic, 0, -1)]);
    let answer: ListOffsetsResponse = ask(session, ApiKey::ListOffsets, &request).await?;
    session.observe("stored", observe::list_offsets(&answer));
    Ok(())
}

pub async fn idempotent_sequences_per_partition(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 2).await?;
    let producer = idempotent_producer(session).await?;
    for (step, partition, sequence) in [
        ("p0 at 0", 0, 0),
        ("p1 at 0", 1, 0),
        ("p0 at 2", 0, 2),
        ("p1 at 5", 1, 5),
    ] {
        let spec = BatchSpec::plain(step, 2).by(producer, sequence);
        produce_observed(session, step, None, vec![(&topic, partition, spec)]).await?;
    }
    read_back(session, &topic, 2).await
}
