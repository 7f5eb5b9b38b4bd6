//! Kafka's variable-length integers.
//!
//! Records use protobuf-style zig-zag varints: `varint` for 32-bit fields (at most 5 bytes) and `varlong` for
//! 64-bit ones (at most 10 bytes). Flexible ("compact") message encodings use *unsigned* varints without zig-zag.
//! Decoders take a slice and a position and never read past the slice; an over-long encoding is
//! [`DecodeError::InvalidVarint`], as in Kafka's `ByteUtils`.

use crate::error::DecodeError;

/// Reads an unsigned LEB128 value of at most `max_bytes` bytes (5 for 32-bit, 10 for 64-bit) at `*pos`.
#[inline(always)]
fn read_unsigned(buf: &[u8], pos: &mut usize, max_bytes: usize) -> Result<u64, DecodeError> {
    let start = *pos;
    let mut value: u64 = 0;
    let mut shift = 0u32;
    for index in 0..max_bytes {
        let Some(&byte) = buf.get(start + index) else {
            return Err(DecodeError::InvalidVarint {
                at: start,
                reason: "varint runs past the end of its section",
            });
        };
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            *pos = start + index + 1;
            return Ok(value);
        }
        shift += 7;
    }
    Err(DecodeError::InvalidVarint {
        at: start,
        reason: if max_bytes == 5 {
            "int32 varint longer than 5 bytes"
        } else {
            "int64 varint longer than 10 bytes"
        },
    })
}

/// Reads a zig-zag `varint` (32-bit) at `*pos`, advancing it.
#[inline(always)]
pub fn read_varint(buf: &[u8], pos: &mut usize) -> Result<i32, DecodeError> {
    // Fast path: one byte, the common case for record lengths and small deltas.
    if let Some(&byte) = buf.get(*pos) {
        if byte & 0x80 == 0 {
            *pos += 1;
            let raw = u32::from(byte);
            return Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32));
        }
    }
    // Java keeps only the low 32 bits of a 5-byte varint; so do we.
    let raw = read_unsigned(buf, pos, 5)? as u32;
    Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
}

/// Reads a zig-zag `varlong` (64-bit) at `*pos`, advancing it.
#[inline(always)]
pub fn read_varlong(buf: &[u8], pos: &mut usize) -> Result<i64, DecodeError> {
    if let Some(&byte) = buf.get(*pos) {
        if byte & 0x80 == 0 {
            *pos += 1;
            let raw = u64::from(byte);
            return Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64));
        }
    }
    let raw = read_unsigned(buf, pos, 10)?;
    Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
}

/// Reads an unsigned 32-bit varint (flexible encodings: lengths + 1, tags, counts) at `*pos`.
pub fn read_unsigned_varint(buf: &[u8], pos: &mut usize) -> Result<u32, DecodeError> {
    let start = *pos;
    let value = read_unsigned(buf, pos, 5)?;
    u32::try_from(value).map_err(|_| DecodeError::InvalidVarint {
        at: start,
        reason: "unsigned varint exceeds 32 bits",
    })
}

/// Appends the zig-zag `varint` encoding of `value`.
#[inline(always)]
pub fn write_varint(out: &mut Vec<u8>, value: i32) {
    write_unsigned(out, u64::from(((value << 1) ^ (value >> 31)) as u32));
}

/// Appends the zig-zag `varlong` encoding of `value`.
#[inline]
pub fn write_varlong(out: &mut Vec<u8>, value: i64) {
    write_unsigned(out, ((value << 1) ^ (value >> 63)) as u64);
}

/// Appends the unsigned varint encoding of `value`.
#[inline]
pub fn write_unsigned_varint(out: &mut Vec<u8>, value: u32) {
    write_unsigned(out, u64::from(value));
}

#[inline(always)]
fn write_unsigned(out: &mut Vec<u8>, mut value: u64) {
    if value < 0x80 {
        out.push(value as u8);
        return;
    }
    let mut encoded = [0u8; 10];
    let mut length = 0;
    while value >= 0x80 {
        encoded[length] = (value as u8) | 0x80;
        value >>= 7;
        length += 1;
    }
    encoded[length] = value as u8;
    out.extend_from_slice(&encoded[..=length]);
}

/// Number of bytes the zig-zag `varint` encoding of `value` takes.
#[inline(always)]
pub fn varint_size(value: i32) -> usize {
    unsigned_size(u64::from(((value << 1) ^ (value >> 31)) as u32))
}

/// Number of bytes the zig-zag `varlong` encoding of `value` takes.
#[inline(always)]
pub fn varlong_size(value: i64) -> usize {
    unsigned_size(((value << 1) ^ (value >> 63)) as u64)
}

#[inline(always)]
fn unsigned_size(value: u64) -> usize {
    // Record fields are mostly small: a predictable branch beats computing from the leading zeros.
    if value < 1 << 7 {
        1
    } else if value < 1 << 14 {
        2
    } else {
        let bits = 64 - value.leading_zeros() as usize;
        bits.div_ceil(7)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zigzag_round_trips_edge_values() {
        for value in [0, 1, -1, 63, -64, 64, i32::MAX, i32::MIN] {
            let mut out = Vec::new();
            write_varint(&mut out, value);
            assert_eq!(out.len(), varint_size(value));
            let mut pos = 0;
            assert_eq!(read_varint(&out, &mut pos), Ok(value));
            assert_eq!(pos, out.len());
        }
        for value in [0, 1, -1, i64::MAX, i64::MIN, 1 << 40] {
            let mut out = Vec::new();
            write_varlong(&mut out, value);
            assert_eq!(out.len(), varlong_size(value));
            let mut pos = 0;
            assert_eq!(read_varlong(&out, &mut pos), Ok(value));
        }
    }

    #[test]
    fn six_byte_int32_varint_is_rejected() {
        let bytes = [0xa6, 0x80, 0x80, 0x80, 0x80, 0x00];
        let mut pos = 0;
        assert!(matches!(
            read_varint(&bytes, &mut pos),
            Err(DecodeError::InvalidVarint { at: 0, .. })
        ));
    }

    #[test]
    fn eleven_byte_varlong_is_rejected() {
        let mut bytes = vec![0xff; 10];
        bytes.push(0x01);
        let mut pos = 0;
        assert!(read_varlong(&bytes, &mut pos).is_err());
    }

    #[test]
    fn varint_cut_short_is_rejected() {
        let mut pos = 0;
        assert!(read_varint(&[0x80, 0x80], &mut pos).is_err());
        assert!(read_varint(&[], &mut pos).is_err());
    }

    #[test]
    fn minus_one_is_a_single_byte() {
        let mut out = Vec::new();
        write_varint(&mut out, -1);
        assert_eq!(out, [0x01]);
    }
}
