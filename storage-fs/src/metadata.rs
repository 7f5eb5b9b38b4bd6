//! `mirrorlog.metadata`: the partition's small key-value records (mirror state, last mirrored offset, high
//! watermark, log start offset), kept as a journal of whole copies: a change appends one frame holding every
//! record and syncs it (one `fdatasync`), and the last whole frame is the current state (ADR 0019). Now and then
//! (and on the first change after an open) the file is rewritten with a single frame, atomically.
//!
//! Layout (big-endian): `"MLMD" | u8 version = 2`, then frames: `u32 body length | body | u32 CRC-32C of the
//! length and the body`, the body being `u32 count | count × (u16 key length, key, u32 value length, value)`.
//! Only the last frame can be torn (every earlier one was synced before the next was written): a frame that runs
//! past the end of the file, a last frame whose checksum fails, or zeros where a frame should start are a torn
//! tail, which [`decode`] reports for the caller to cut; a damaged frame with more frames after it is corruption.
//! Version 1, the whole file as one body and its checksum with no frame length, is still read.

use std::collections::BTreeMap;

use storage::StorageError;

const MAGIC: &[u8; 4] = b"MLMD";
/// The whole-file format of earlier releases, read but no longer written.
const VERSION_WHOLE_FILE: u8 = 1;
const VERSION_JOURNAL: u8 = 2;
const HEADER_LEN: usize = MAGIC.len() + 1;
/// A frame's length field and checksum.
const FRAME_OVERHEAD: usize = 8;

fn corrupt(reason: impl Into<String>) -> StorageError {
    StorageError::Corrupt {
        what: "mirrorlog.metadata".into(),
        reason: reason.into(),
    }
}

/// What a metadata file holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// The records of the last whole frame.
    pub records: BTreeMap<String, Vec<u8>>,
    /// Bytes up to the end of the last whole frame (the whole file when nothing is torn).
    pub valid_len: u64,
    /// Why the bytes after `valid_len` are a torn tail, if there are any.
    pub torn_tail: Option<String>,
    /// True for a journal (version 2) that frames can be appended to; false for a version 1 file.
    pub appendable: bool,
}

/// The body of a frame: every record.
fn encode_body(records: &BTreeMap<String, Vec<u8>>, out: &mut Vec<u8>) {
    out.extend_from_slice(&(records.len() as u32).to_be_bytes());
    for (key, value) in records {
        out.extend_from_slice(&(key.len() as u16).to_be_bytes());
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(&(value.len() as u32).to_be_bytes());
        out.extend_from_slice(value);
    }
}

/// One frame holding every record, to append to a journal.
pub fn encode_frame(records: &BTreeMap<String, Vec<u8>>) -> Vec<u8> {
    let mut out = vec![0; 4];
    encode_body(records, &mut out);
    let body_len = (out.len() - 4) as u32;
    out[..4].copy_from_slice(&body_len.to_be_bytes());
    let crc = record_format::crc::crc32c(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

/// A whole journal file holding the records in one frame.
pub fn encode_file(records: &BTreeMap<String, Vec<u8>>) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN);
    out.extend_from_slice(MAGIC);
    out.push(VERSION_JOURNAL);
    out.extend_from_slice(&encode_frame(records));
    out
}

fn take<'a>(bytes: &'a [u8], pos: &mut usize, len: usize, what: &str) -> Result<&'a [u8], StorageError> {
    let end = pos
        .checked_add(len)
        .filter(|&end| end <= bytes.len())
        .ok_or_else(|| corrupt(format!("{what} runs past the end")))?;
    let slice = &bytes[*pos..end];
    *pos = end;
    Ok(slice)
}

fn be_u32(bytes: &[u8]) -> u32 {
    u32::from_be_bytes(bytes.try_into().unwrap_or_default())
}

/// Decodes a body (count and records); any inconsistency is [`StorageError::Corrupt`].
fn decode_body(body: &[u8]) -> Result<BTreeMap<String, Vec<u8>>, StorageError> {
    let mut pos = 0;
    let count = be_u32(take(body, &mut pos, 4, "count")?);
    let mut records = BTreeMap::new();
    for _ in 0..count {
        let key_len = u16::from_be_bytes(
            take(body, &mut pos, 2, "key length")?
                .try_into()
                .unwrap_or_default(),
        );
        let key = std::str::from_utf8(take(body, &mut pos, usize::from(key_len), "key")?)
            .map_err(|_| corrupt("key is not UTF-8"))?
            .to_owned();
        let value_len = be_u32(take(body, &mut pos, 4, "value length")?);
        let value = take(body, &mut pos, value_len as usize, "value")?.to_vec();
        records.insert(key, value);
    }
    if pos != body.len() {
        return Err(corrupt("trailing bytes"));
    }
    Ok(records)
}

/// Decodes a metadata file of either version; see the module docs for what is a torn tail and what is corrupt.
pub fn decode(bytes: &[u8]) -> Result<Decoded, StorageError> {
    let mut pos = 0;
    if take(bytes, &mut pos, MAGIC.len(), "magic")? != MAGIC {
        return Err(corrupt("not a metadata file"));
    }
    match take(bytes, &mut pos, 1, "version")?[0] {
        VERSION_WHOLE_FILE => decode_whole_file(bytes),
        VERSION_JOURNAL => decode_journal(bytes),
        version => Err(corrupt(format!("unsupported version {version}"))),
    }
}

fn decode_whole_file(bytes: &[u8]) -> Result<Decoded, StorageError> {
    let Some((body, crc)) = bytes.split_last_chunk::<4>() else {
        return Err(corrupt("shorter than its checksum"));
    };
    if record_format::crc::crc32c(body) != u32::from_be_bytes(*crc) {
        return Err(corrupt("checksum mismatch"));
    }
    Ok(Decoded {
        records: decode_body(&body[HEADER_LEN..])?,
        valid_len: bytes.len() as u64,
        torn_tail: None,
        appendable: false,
    })
}

fn decode_journal(bytes: &[u8]) -> Result<Decoded, StorageError> {
    let mut pos = HEADER_LEN;
    let mut records = None;
    let mut torn_tail = None;
    while pos < bytes.len() {
        let rest = &bytes[pos..];
        let frame_len = rest
            .get(..4)
            .map(|len| (be_u32(len) as usize).saturating_add(FRAME_OVERHEAD));
        let frame = frame_len.and_then(|len| rest.get(..len));
        let Some(frame) = frame.filter(|frame| frame.len() >= FRAME_OVERHEAD + 4) else {
            // An interrupted append: a frame running past the end of the file, or zeros where it should start.
            // (A length damaged in the middle of the file that points past its end looks the same; the
            // checksum that would tell them apart is out of reach.)
            let zeros = rest.iter().all(|&b| b == 0);
            if frame_len.is_some_and(|len| len <= rest.len()) && !zeros {
                return Err(corrupt(format!(
                    "a frame too short to hold its records at byte {pos}"
                )));
            }
            torn_tail = Some(if zeros {
                format!("{} zero bytes after the last frame", rest.len())
            } else {
                format!("a frame cut short ({} bytes)", rest.len())
            });
            break;
        };
        let (covered, crc) = frame.split_at(frame.len() - 4);
        if record_format::crc::crc32c(covered) != be_u32(crc) {
            if frame.len() == rest.len() {
                torn_tail = Some("the last frame's checksum does not match".to_owned());
                break;
            }
            return Err(corrupt(format!("checksum mismatch in the frame at byte {pos}")));
        }
        records = Some(decode_body(&covered[4..])?);
        pos += frame.len();
    }
    let Some(records) = records else {
        // The file is created with its first frame, atomically: one without a whole frame is damaged.
        return Err(corrupt(match torn_tail {
            Some(reason) => format!("no whole frame: {reason}"),
            None => "no frame".to_owned(),
        }));
    };
    Ok(Decoded {
        records,
        valid_len: pos as u64,
        torn_tail,
        appendable: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(state: &str) -> BTreeMap<String, Vec<u8>> {
        let mut records = BTreeMap::new();
        records.insert("mirror-state".to_owned(), state.as_bytes().to_vec());
        records.insert("log-start-offset".to_owned(), 7i64.to_be_bytes().to_vec());
        records
    }

    fn journal(states: &[&str]) -> Vec<u8> {
        let mut bytes = encode_file(&records(states[0]));
        for state in &states[1..] {
            bytes.extend_from_slice(&encode_frame(&records(state)));
        }
        bytes
    }

    #[test]
    fn the_last_whole_frame_is_the_state() {
        let bytes = journal(&["MIRRORING", "STOPPING", "STOPPED"]);
        let decoded = decode(&bytes).unwrap();
        assert_eq!(decoded.records, records("STOPPED"));
        assert_eq!(decoded.valid_len, bytes.len() as u64);
        assert_eq!(decoded.torn_tail, None);
        assert!(decoded.appendable);
    }

    #[test]
    fn a_torn_last_frame_at_any_byte_leaves_the_previous_state() {
        let whole = journal(&["MIRRORING", "STOPPING"]);
        let first_end = journal(&["MIRRORING"]).len();
        for cut in first_end + 1..whole.len() {
            let decoded = decode(&whole[..cut]).unwrap();
            assert_eq!(decoded.records, records("MIRRORING"), "cut at {cut}");
            assert_eq!(decoded.valid_len, first_end as u64, "cut at {cut}");
            assert!(decoded.torn_tail.is_some(), "cut at {cut}");
        }
        let mut zeroed = whole.clone();
        zeroed[first_end..].fill(0);
        let decoded = decode(&zeroed).unwrap();
        assert_eq!(decoded.records, records("MIRRORING"));
        assert!(decoded.torn_tail.unwrap().contains("zero bytes"));
        let mut flipped = whole.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert_eq!(decode(&flipped).unwrap().valid_len, first_end as u64);
    }

    #[test]
    fn a_damaged_frame_with_frames_after_it_is_corruption() {
        let mut bytes = journal(&["MIRRORING", "STOPPING", "STOPPED"]);
        bytes[HEADER_LEN + 10] ^= 1;
        let error = decode(&bytes).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("checksum mismatch in the frame at byte 5"),
            "{error}"
        );
    }

    #[test]
    fn a_file_without_a_whole_frame_is_corrupt() {
        let bytes = journal(&["MIRRORING"]);
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn a_version_1_file_is_still_read_and_not_appended_to() {
        let mut bytes = MAGIC.to_vec();
        bytes.push(VERSION_WHOLE_FILE);
        encode_body(&records("STOPPED"), &mut bytes);
        let crc = record_format::crc::crc32c(&bytes);
        bytes.extend_from_slice(&crc.to_be_bytes());
        let decoded = decode(&bytes).unwrap();
        assert_eq!(decoded.records, records("STOPPED"));
        assert!(!decoded.appendable);
        let mut flipped = bytes.clone();
        flipped[9] ^= 1;
        assert!(decode(&flipped).is_err());
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        fn record_maps() -> impl Strategy<Value = Vec<BTreeMap<String, Vec<u8>>>> {
            let map = proptest::collection::btree_map(
                "[a-z@.-]{1,12}",
                proptest::collection::vec(any::<u8>(), 0..40),
                0..5,
            );
            proptest::collection::vec(map, 1..6)
        }

        proptest! {
            #[test]
            fn any_cut_of_a_journal_decodes_to_its_last_whole_frame(maps in record_maps(), cut in any::<prop::sample::Index>()) {
                let mut bytes = encode_file(&maps[0]);
                let mut ends = vec![bytes.len()];
                for map in &maps[1..] {
                    bytes.extend_from_slice(&encode_frame(map));
                    ends.push(bytes.len());
                }
                let cut = ends[0] + cut.index(bytes.len() - ends[0] + 1);
                let decoded = decode(&bytes[..cut]).unwrap();
                let whole = ends.iter().filter(|&&end| end <= cut).count();
                prop_assert_eq!(&decoded.records, &maps[whole - 1]);
                prop_assert_eq!(decoded.valid_len as usize, ends[whole - 1]);
                prop_assert_eq!(decoded.torn_tail.is_some(), cut != ends[whole - 1]);
            }

            #[test]
            fn arbitrary_bytes_decode_or_fail_without_panicking(tail in proptest::collection::vec(any::<u8>(), 0..200)) {
                let mut bytes = b"MLMD\x02".to_vec();
                bytes.extend_from_slice(&tail);
                let _ = decode(&bytes);
                let _ = decode(&tail);
            }
        }
    }
}
