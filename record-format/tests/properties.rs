//! Property tests: arbitrary batches round-trip through the encoder and decoder; arbitrary bytes never panic the
//! decoder or the segment readers; barrier values with arbitrary unknown tagged fields round-trip.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use bytes::Bytes;
use proptest::prelude::*;
use record_format::{
    BatchBuilder, BatchIter, Compression, ControlRecord, DecodeError, MirrorPidResetRecord, NewHeader,
    NewRecord, OffsetDeltas, RecordBatch, Records, SegmentReader, TaggedField, TimestampType,
};

fn bytes_field() -> impl Strategy<Value = Option<Bytes>> {
    prop::option::of(prop::collection::vec(any::<u8>(), 0..40).prop_map(Bytes::from))
}

fn new_record() -> impl Strategy<Value = NewRecord> {
    (
        any::<i64>(),
        any::<i32>(),
        bytes_field(),
        bytes_field(),
        prop::collection::vec(
            (
                prop::collection::vec(any::<u8>(), 0..8).prop_map(Bytes::from),
                bytes_field(),
            )
                .prop_map(|(key, value)| NewHeader { key, value }),
            0..4,
        ),
    )
        .prop_map(|(timestamp_delta, offset_delta, key, value, headers)| NewRecord {
            attributes: 0,
            timestamp_delta,
            offset_delta,
            key,
            value,
            headers,
        })
}

fn compression() -> impl Strategy<Value = Compression> {
    prop::sample::select(Compression::ALL.to_vec())
}

prop_compose! {
    fn batch_builder()(
        base_offset in any::<i64>(),
        leader_epoch in any::<i32>(),
        codec in compression(),
        log_append in any::<bool>(),
        transactional in any::<bool>(),
        producer in (any::<i64>(), any::<i16>(), any::<i32>()),
        base_timestamp in any::<i64>(),
        records in prop::collection::vec(new_record(), 0..12),
    ) -> BatchBuilder {
        let mut builder = BatchBuilder::new()
            .base_offset(base_offset)
            .partition_leader_epoch(leader_epoch)
            .compression(codec)
            .timestamp_type(if log_append { TimestampType::LogAppendTime } else { TimestampType::CreateTime })
            .transactional(transactional)
            .producer(producer.0, producer.1, producer.2)
            .base_timestamp(base_timestamp);
        for record in records {
            builder.push(record);
        }
        builder
    }
}

fn tagged_fields() -> impl Strategy<Value = Vec<TaggedField>> {
    prop::collection::btree_map(1u32..100_000, prop::collection::vec(any::<u8>(), 0..20), 0..5).prop_map(
        |map| {
            map.into_iter()
                .map(|(tag, data)| TaggedField { tag, data })
                .collect()
        },
    )
}

/// What `Records::check_offset_deltas` must answer, found the long way: every record decoded in turn.
fn offset_deltas_by_walking(records: &Records<'_>) -> Result<OffsetDeltas, DecodeError> {
    let mut position = 0;
    for record in records.iter() {
        let offset_delta = record?.offset_delta;
        if i64::from(offset_delta) != position as i64 {
            return Ok(OffsetDeltas::OutOfPlace {
                position,
                offset_delta,
            });
        }
        position += 1;
    }
    Ok(OffsetDeltas::InOrder { records: position })
}

/// Decodes everything decodable in `bytes` as one batch, without the CRC gate, so corrupt input reaches the
/// record and control decoders.
fn decode_everything(bytes: Bytes) {
    if let Ok(batch) = RecordBatch::parse(bytes) {
        let _ = batch.verify_crc();
        let _ = batch.last_sequence();
        if let Ok(records) = batch.records() {
            let _ = records.check_offset_deltas();
            for record in records.iter().flatten() {
                for header in record.headers {
                    let _ = header.key_str();
                }
                let _ = ControlRecord::decode(record.key, record.value);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_batches_round_trip(builder in batch_builder()) {
        let built = builder.build().unwrap();
        let decoded = RecordBatch::decode(built.as_bytes().clone()).unwrap();
        let again = BatchBuilder::from_batch(&decoded).unwrap();
        prop_assert_eq!(again.records(), builder.records());
        let rebuilt = again.build().unwrap();
        prop_assert_eq!(rebuilt.as_bytes(), built.as_bytes());
        prop_assert_eq!(decoded.record_count() as usize, builder.records().len());
    }

    #[test]
    fn the_offset_delta_check_answers_what_walking_the_records_finds(
        codec in compression(),
        records in prop::collection::vec(new_record(), 0..12),
        misplaced in prop::option::of((any::<prop::sample::Index>(), any::<i32>())),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
    ) {
        // Numbered as a producer numbers them (0, 1, 2, …), but for at most one record anywhere in the batch; some
        // bytes changed, so decoding errors occur too.
        let misplaced = misplaced.map(|(index, delta)| (index.index(records.len().max(1)), delta));
        let mut builder = BatchBuilder::new().compression(codec).producer(1, 0, 0);
        for (position, mut record) in records.into_iter().enumerate() {
            record.offset_delta = match misplaced {
                Some((at, delta)) if at == position => delta,
                _ => position as i32,
            };
            builder.push(record);
        }
        let mut bytes = builder.build().unwrap().into_bytes().to_vec();
        for (index, value) in flips {
            let at = index.index(bytes.len());
            bytes[at] = value;
        }
        if let Ok(batch) = RecordBatch::parse(Bytes::from(bytes)) {
            if let Ok(records) = batch.records() {
                let expected = offset_deltas_by_walking(&records);
                let checked = records.check_offset_deltas();
                prop_assert_eq!(checked.is_ok(), expected.is_ok(), "{:?} / {:?}", checked, expected);
                if let (Ok(checked), Ok(expected)) = (checked, expected) {
                    prop_assert_eq!(checked, expected);
                }
            }
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_batch_decoder(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        decode_everything(Bytes::from(bytes));
    }

    #[test]
    fn mutated_valid_batches_never_panic_the_decoder(
        builder in batch_builder(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let mut bytes = builder.build().unwrap().into_bytes().to_vec();
        for (index, value) in flips {
            let at = index.index(bytes.len());
            bytes[at] = value;
        }
        decode_everything(Bytes::from(bytes));
    }

    #[test]
    fn a_batch_s_offsets_read_in_place_are_what_parsing_it_finds(
        builder in batch_builder(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        cut in any::<prop::sample::Index>(),
        cut_it in any::<bool>(),
    ) {
        let mut bytes = builder.build().unwrap().into_bytes().to_vec();
        for (index, value) in flips {
            let at = index.index(bytes.len());
            bytes[at] = value;
        }
        if cut_it {
            bytes.truncate(cut.index(bytes.len()));
        }
        let in_place = RecordBatch::offsets_of(&bytes);
        let parsed = RecordBatch::parse(Bytes::from(bytes))
            .map(|batch| (batch.base_offset(), batch.last_offset()));
        prop_assert_eq!(in_place, parsed);
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_segment_readers(
        bytes in prop::collection::vec(any::<u8>(), 0..600),
        known_length in any::<bool>(),
    ) {
        let length = known_length.then_some(bytes.len() as u64);
        let streamed: Vec<_> = SegmentReader::new(&bytes[..], length).collect();
        let in_memory: Vec<_> = BatchIter::new(Bytes::from(bytes.clone())).collect();
        // Both readers stop at the first error and agree on how many batches were good.
        let good = |results: &[Result<record_format::SegmentBatch, record_format::SegmentError>]| {
            results.iter().filter(|r| r.is_ok()).count()
        };
        prop_assert_eq!(good(&streamed), good(&in_memory));
        prop_assert!(streamed.iter().filter(|r| r.is_err()).count() <= 1);
    }

    #[test]
    fn segments_of_valid_batches_read_back_with_their_offsets(
        builders in prop::collection::vec(batch_builder(), 1..5),
        cut in any::<prop::sample::Index>(),
    ) {
        let batches: Vec<_> = builders.iter().map(|b| b.build().unwrap().into_bytes()).collect();
        let file: Vec<u8> = batches.iter().flat_map(|b| b.iter().copied()).collect();
        let read: Vec<_> = SegmentReader::new(&file[..], Some(file.len() as u64)).collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(read.len(), batches.len());
        let mut offset = 0u64;
        for (found, original) in read.iter().zip(&batches) {
            prop_assert_eq!(found.file_offset, offset);
            prop_assert_eq!(found.batch.as_bytes(), original);
            offset += original.len() as u64;
        }
        // Cutting the file anywhere inside the last batch leaves a torn tail after the complete ones.
        let last_start = file.len() - batches[batches.len() - 1].len();
        let cut_at = last_start + cut.index(batches[batches.len() - 1].len());
        let results: Vec<_> = SegmentReader::new(&file[..cut_at], Some(cut_at as u64)).collect();
        prop_assert_eq!(results.iter().filter(|r| r.is_ok()).count(), batches.len() - 1);
        if cut_at > last_start {
            let error = results.last().unwrap().as_ref().unwrap_err();
            prop_assert_eq!(error.category().map(|c| c.as_str()), Some("truncated"));
            prop_assert_eq!(error.file_offset(), last_start as u64);
        }
    }

    #[test]
    fn barrier_with_arbitrary_unknown_tags_round_trips(
        source in "\\PC{0,40}",
        writer in prop::option::of("\\PC{0,40}"),
        version in any::<i16>().prop_filter("non-negative", |v| *v >= 0),
        unknown in tagged_fields(),
    ) {
        let record = MirrorPidResetRecord {
            version,
            source_cluster_id: source,
            writer_cluster_id: writer,
            unknown_tagged_fields: unknown.iter().map(|field| (field.tag, field.data.as_slice())).collect(),
        };
        let encoded = record.encode();
        prop_assert_eq!(MirrorPidResetRecord::decode(&encoded).unwrap(), record.clone());
        let batch = record_format::mirror_pid_reset_batch(&record, record_format::ControlBatchPlacement {
            base_offset: 0, partition_leader_epoch: 0, timestamp: 0,
        }).unwrap();
        let decoded = record_format::control::decode_control_records(&batch).unwrap();
        prop_assert_eq!(decoded, vec![ControlRecord::MirrorPidReset(record)]);
    }
}
