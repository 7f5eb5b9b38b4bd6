//! `mirrorlog.metadata`: the partition's small key-value records (mirror state, last mirrored offset, high
//! watermark, log start offset), replaced as a whole file atomically on every change.
//!
//! Layout (big-endian): `"MLMD" | u8 version = 1 | u32 count | count × (u16 key length, key, u32 value length,
//! value) | u32 CRC-32C of everything before it`. Lengths are checked against the file before use.

use std::collections::BTreeMap;

use storage::StorageError;

const MAGIC: &[u8; 4] = b"MLMD";
const VERSION: u8 = 1;

fn corrupt(reason: impl Into<String>) -> StorageError {
    StorageError::Corrupt {
        what: "mirrorlog.metadata".into(),
        reason: reason.into(),
    }
}

/// Encodes the records.
pub fn encode(records: &BTreeMap<String, Vec<u8>>) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.push(VERSION);
    out.extend_from_slice(&(records.len() as u32).to_be_bytes());
    for (key, value) in records {
        out.extend_from_slice(&(key.len() as u16).to_be_bytes());
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(&(value.len() as u32).to_be_bytes());
        out.extend_from_slice(value);
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_be_bytes());
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

/// Decodes the records; any inconsistency is [`StorageError::Corrupt`].
pub fn decode(bytes: &[u8]) -> Result<BTreeMap<String, Vec<u8>>, StorageError> {
    let Some((body, crc)) = bytes.split_last_chunk::<4>() else {
        return Err(corrupt("shorter than its checksum"));
    };
    if crc32c::crc32c(body) != u32::from_be_bytes(*crc) {
        return Err(corrupt("checksum mismatch"));
    }
    let mut pos = 0;
    if take(body, &mut pos, 4, "magic")? != MAGIC {
        return Err(corrupt("not a metadata file"));
    }
    let version = take(body, &mut pos, 1, "version")?[0];
    if version != VERSION {
        return Err(corrupt(format!("unsupported version {version}")));
    }
    let count = u32::from_be_bytes(take(body, &mut pos, 4, "count")?.try_into().unwrap_or_default());
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
        let value_len = u32::from_be_bytes(
            take(body, &mut pos, 4, "value length")?
                .try_into()
                .unwrap_or_default(),
        );
        let value = take(body, &mut pos, value_len as usize, "value")?.to_vec();
        records.insert(key, value);
    }
    if pos != body.len() {
        return Err(corrupt("trailing bytes"));
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_corruption_is_detected() {
        let mut records = BTreeMap::new();
        records.insert("mirror-state".to_owned(), b"STOPPED".to_vec());
        records.insert("log-start-offset".to_owned(), 7i64.to_be_bytes().to_vec());
        let bytes = encode(&records);
        assert_eq!(decode(&bytes).unwrap(), records);
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut flipped = bytes.clone();
        flipped[9] ^= 1;
        assert!(decode(&flipped).is_err());
    }
}
