//! Primitives of Kafka's *flexible* generated-message encoding, as used by control-record values.
//!
//! Compact strings are `uvarint(length + 1)` then UTF-8 bytes (0 = null); a struct ends with a tagged-field
//! section: `uvarint count`, then per field `uvarint tag`, `uvarint size`, payload. Readers never allocate from a
//! length they have not checked against the bytes present.

use crate::error::DecodeError;
use crate::varint::{read_unsigned_varint, write_unsigned_varint};

/// One tagged field as stored: its tag and raw payload.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TaggedField {
    /// The field's tag.
    pub tag: u32,
    /// The payload bytes, uninterpreted.
    pub data: Vec<u8>,
}

/// Reads a big-endian `i16` at `*pos`.
pub fn read_i16(buf: &[u8], pos: &mut usize) -> Result<i16, DecodeError> {
    let bytes = buf
        .get(*pos..*pos + 2)
        .ok_or_else(|| DecodeError::corrupt(*pos, "int16 cut short"))?;
    *pos += 2;
    Ok(i16::from_be_bytes([bytes[0], bytes[1]]))
}

/// Reads a big-endian `i32` at `*pos`.
pub fn read_i32(buf: &[u8], pos: &mut usize) -> Result<i32, DecodeError> {
    let bytes = buf
        .get(*pos..*pos + 4)
        .ok_or_else(|| DecodeError::corrupt(*pos, "int32 cut short"))?;
    *pos += 4;
    Ok(i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
}

/// Reads a big-endian `i64` at `*pos`.
pub fn read_i64(buf: &[u8], pos: &mut usize) -> Result<i64, DecodeError> {
    let bytes = buf
        .get(*pos..*pos + 8)
        .ok_or_else(|| DecodeError::corrupt(*pos, "int64 cut short"))?;
    *pos += 8;
    let mut raw = [0u8; 8];
    raw.copy_from_slice(bytes);
    Ok(i64::from_be_bytes(raw))
}

/// Reads `uvarint size` + that many bytes, checked against the input.
fn read_sized<'a>(buf: &'a [u8], pos: &mut usize, size: usize, what: &str) -> Result<&'a [u8], DecodeError> {
    let at = *pos;
    let end = at
        .checked_add(size)
        .filter(|&end| end <= buf.len())
        .ok_or_else(|| DecodeError::corrupt(at, format!("{what} of {size} bytes runs past the end")))?;
    *pos = end;
    Ok(&buf[at..end])
}

/// Reads a nullable compact string.
pub fn read_compact_nullable_string<'a>(
    buf: &'a [u8],
    pos: &mut usize,
) -> Result<Option<&'a str>, DecodeError> {
    let at = *pos;
    let length_plus_one = read_unsigned_varint(buf, pos)?;
    let Some(length) = (length_plus_one as usize).checked_sub(1) else {
        return Ok(None);
    };
    let bytes = read_sized(buf, pos, length, "compact string")?;
    std::str::from_utf8(bytes)
        .map(Some)
        .map_err(|_| DecodeError::corrupt(at, "compact string is not UTF-8"))
}

/// Reads a non-nullable compact string.
pub fn read_compact_string<'a>(buf: &'a [u8], pos: &mut usize) -> Result<&'a str, DecodeError> {
    let at = *pos;
    read_compact_nullable_string(buf, pos)?
        .ok_or_else(|| DecodeError::corrupt(at, "null in a non-nullable compact string"))
}

/// Appends a compact string.
pub fn write_compact_string(out: &mut Vec<u8>, value: &str) {
    write_unsigned_varint(out, (value.len() as u32).saturating_add(1));
    out.extend_from_slice(value.as_bytes());
}

/// Tagged fields kept as their encoding (tag varint, size varint, payload, one after another, in stored order)
/// with a count: one buffer no larger than the input, however many fields a value declares — a hostile value
/// of millions of two-byte fields costs its own size, not tens of bytes per field.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct TaggedFields {
    count: usize,
    encoded: Vec<u8>,
}

impl TaggedFields {
    /// No fields.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a field (callers keep tags in ascending order, as Kafka requires).
    pub fn push(&mut self, tag: u32, data: &[u8]) {
        write_unsigned_varint(&mut self.encoded, tag);
        write_unsigned_varint(&mut self.encoded, data.len() as u32);
        self.encoded.extend_from_slice(data);
        self.count += 1;
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        self.count
    }

    /// True when there is none.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The fields in stored order: `(tag, payload)`.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &[u8])> + '_ {
        let mut pos = 0;
        std::iter::from_fn(move || {
            if pos >= self.encoded.len() {
                return None;
            }
            // The buffer was written by `push`: every field reads back.
            let tag = read_unsigned_varint(&self.encoded, &mut pos).ok()?;
            let size = read_unsigned_varint(&self.encoded, &mut pos).ok()? as usize;
            let data = self.encoded.get(pos..pos + size)?;
            pos += size;
            Some((tag, data))
        })
    }

    /// The fields as owned values (small field lists: tests, printing).
    pub fn to_vec(&self) -> Vec<TaggedField> {
        self.iter()
            .map(|(tag, data)| TaggedField {
                tag,
                data: data.to_vec(),
            })
            .collect()
    }
}

impl<'a> FromIterator<(u32, &'a [u8])> for TaggedFields {
    fn from_iter<I: IntoIterator<Item = (u32, &'a [u8])>>(fields: I) -> Self {
        let mut out = TaggedFields::new();
        for (tag, data) in fields {
            out.push(tag, data);
        }
        out
    }
}

/// Reads a tagged-field section, handing each field (tag, payload borrowed from `buf`) to `visit` in stored
/// order; nothing is allocated per field.
pub fn visit_tagged_fields<'a>(
    buf: &'a [u8],
    pos: &mut usize,
    mut visit: impl FnMut(u32, &'a [u8]) -> Result<(), DecodeError>,
) -> Result<(), DecodeError> {
    let count = read_unsigned_varint(buf, pos)?;
    for _ in 0..count {
        if *pos >= buf.len() {
            return Err(DecodeError::corrupt(
                *pos,
                format!("{count} tagged fields declared, input ends"),
            ));
        }
        let tag = read_unsigned_varint(buf, pos)?;
        let size = read_unsigned_varint(buf, pos)? as usize;
        let data = read_sized(buf, pos, size, "tagged field")?;
        visit(tag, data)?;
    }
    Ok(())
}

/// Reads a tagged-field section: every field in stored order, payloads uninterpreted.
pub fn read_tagged_fields(buf: &[u8], pos: &mut usize) -> Result<TaggedFields, DecodeError> {
    let mut fields = TaggedFields::new();
    visit_tagged_fields(buf, pos, |tag, data| {
        fields.push(tag, data);
        Ok(())
    })?;
    Ok(fields)
}

/// Appends a tagged-field section. Fields must already be in ascending tag order.
pub fn write_tagged_fields<'a>(out: &mut Vec<u8>, fields: impl ExactSizeIterator<Item = (u32, &'a [u8])>) {
    write_unsigned_varint(out, fields.len() as u32);
    for (tag, data) in fields {
        write_unsigned_varint(out, tag);
        write_unsigned_varint(out, data.len() as u32);
        out.extend_from_slice(data);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_string_zero_length_prefix_is_null() {
        let mut pos = 0;
        assert_eq!(read_compact_nullable_string(&[0], &mut pos), Ok(None));
        let mut pos = 0;
        assert!(read_compact_string(&[0], &mut pos).is_err());
    }

    #[test]
    fn compact_string_longer_than_input_is_rejected() {
        let mut pos = 0;
        assert!(read_compact_string(&[0x7f, b'a'], &mut pos).is_err());
    }

    #[test]
    fn huge_tagged_field_count_fails_without_allocating_for_it() {
        let mut buf = Vec::new();
        write_unsigned_varint(&mut buf, u32::MAX);
        let mut pos = 0;
        assert!(read_tagged_fields(&buf, &mut pos).is_err());
    }
}
