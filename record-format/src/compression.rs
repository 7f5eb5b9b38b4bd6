//! The five record-section codecs, framed exactly as Kafka frames them.
//!
//! | id | codec | framing written | framing read |
//! |---|---|---|---|
//! | 0 | none | — | — |
//! | 1 | gzip | one gzip member, deflate level 6, mtime 0, OS byte 0 (as `java.util.zip.GZIPOutputStream`) | any number of members |
//! | 2 | snappy | xerial: `82 'SNAPPY' 00`, version 1, compat 1, then `[i32 length][raw block]` per 32 KiB of input | xerial, or one raw block |
//! | 3 | lz4 | LZ4 frame: independent 64 KiB blocks, no block or content checksum, no content size | any LZ4 frame |
//! | 4 | zstd | one frame, level 3, no checksum, no content size (as zstd-jni's streaming output) | any zstd frames |
//!
//! Decompression never allocates more than [`DecodeLimits::max_uncompressed_records_bytes`] (plus one read
//! buffer): a "bomb" fails with [`DecodeError::DecompressedTooLarge`] as soon as the limit is passed.

use std::io::{Read, Write};

use crate::error::{DecodeError, EncodeError};

/// A record-section codec (attribute bits 0–2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Compression {
    /// Id 0.
    #[default]
    None,
    /// Id 1.
    Gzip,
    /// Id 2.
    Snappy,
    /// Id 3.
    Lz4,
    /// Id 4.
    Zstd,
}

impl Compression {
    /// All codecs in id order.
    pub const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    /// The codec for an attribute id; 5–7 are [`DecodeError::UnsupportedCompression`].
    pub fn from_id(id: u8) -> Result<Self, DecodeError> {
        Ok(match id {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            4 => Compression::Zstd,
            _ => return Err(DecodeError::UnsupportedCompression { id }),
        })
    }

    /// The attribute id.
    pub fn id(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }

    /// Kafka's name (`none`, `gzip`, `snappy`, `lz4`, `zstd`).
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

/// Bounds applied while decoding untrusted batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Largest decompressed records section accepted (default 64 MiB).
    pub max_uncompressed_records_bytes: usize,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits {
            max_uncompressed_records_bytes: 64 * 1024 * 1024,
        }
    }
}

const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_HEADER_LEN: usize = 16;
const XERIAL_BLOCK_SIZE: usize = 32 * 1024;
const GZIP_LEVEL: u32 = 6;
const ZSTD_LEVEL: i32 = 3;

/// Inflates a compressed records section, refusing to produce more than `limits` allows.
pub fn decompress(codec: Compression, input: &[u8], limits: &DecodeLimits) -> Result<Vec<u8>, DecodeError> {
    let limit = limits.max_uncompressed_records_bytes;
    match codec {
        Compression::None => {
            if input.len() > limit {
                return Err(DecodeError::DecompressedTooLarge {
                    codec: codec.name(),
                    limit,
                });
            }
            Ok(input.to_vec())
        }
        Compression::Gzip => read_capped(flate2::read::MultiGzDecoder::new(input), codec, input, limit),
        Compression::Snappy => decompress_snappy(input, limit),
        Compression::Lz4 => read_capped(lz4_flex::frame::FrameDecoder::new(input), codec, input, limit),
        Compression::Zstd => {
            let decoder = zstd::stream::read::Decoder::with_buffer(input).map_err(|error| {
                DecodeError::Decompression {
                    codec: codec.name(),
                    message: error.to_string(),
                }
            })?;
            read_capped(decoder, codec, input, limit)
        }
    }
}

fn read_capped(
    reader: impl Read,
    codec: Compression,
    input: &[u8],
    limit: usize,
) -> Result<Vec<u8>, DecodeError> {
    // The initial capacity is a guess from the *input* size, never from a field of the stream.
    let mut out = Vec::with_capacity(input.len().saturating_mul(4).min(limit));
    let mut capped = reader.take(limit as u64 + 1);
    capped
        .read_to_end(&mut out)
        .map_err(|error| DecodeError::Decompression {
            codec: codec.name(),
            message: error.to_string(),
        })?;
    if out.len() > limit {
        return Err(DecodeError::DecompressedTooLarge {
            codec: codec.name(),
            limit,
        });
    }
    Ok(out)
}

fn snappy_error(message: impl Into<String>) -> DecodeError {
    DecodeError::Decompression {
        codec: "snappy",
        message: message.into(),
    }
}

fn decompress_snappy(input: &[u8], limit: usize) -> Result<Vec<u8>, DecodeError> {
    let mut decoder = snap::raw::Decoder::new();
    let mut out = Vec::new();
    let mut append_block = |block: &[u8], out: &mut Vec<u8>| -> Result<(), DecodeError> {
        let claimed = snap::raw::decompress_len(block).map_err(|e| snappy_error(e.to_string()))?;
        if out.len().saturating_add(claimed) > limit {
            return Err(DecodeError::DecompressedTooLarge {
                codec: "snappy",
                limit,
            });
        }
        let start = out.len();
        out.resize(start + claimed, 0);
        let written = decoder
            .decompress(block, &mut out[start..])
            .map_err(|e| snappy_error(e.to_string()))?;
        out.truncate(start + written);
        Ok(())
    };
    if !input.starts_with(&XERIAL_MAGIC) {
        append_block(input, &mut out)?;
        return Ok(out);
    }
    if input.len() < XERIAL_HEADER_LEN {
        return Err(snappy_error("xerial header cut short"));
    }
    let mut pos = XERIAL_HEADER_LEN;
    while pos < input.len() {
        let Some(length_bytes) = input.get(pos..pos + 4) else {
            return Err(snappy_error("xerial block length cut short"));
        };
        let length = i32::from_be_bytes([length_bytes[0], length_bytes[1], length_bytes[2], length_bytes[3]]);
        pos += 4;
        let block = usize::try_from(length)
            .ok()
            .and_then(|length| input.get(pos..pos.checked_add(length)?))
            .ok_or_else(|| snappy_error(format!("xerial block length {length} runs past the input")))?;
        append_block(block, &mut out)?;
        pos += block.len();
    }
    Ok(out)
}

fn compression_error(codec: Compression, error: impl std::fmt::Display) -> EncodeError {
    EncodeError::Compression {
        codec: codec.name(),
        message: error.to_string(),
    }
}

/// Compresses a records section with Kafka's framing for `codec` (see the module table).
pub fn compress(codec: Compression, input: &[u8]) -> Result<Vec<u8>, EncodeError> {
    match codec {
        Compression::None => Ok(input.to_vec()),
        Compression::Gzip => {
            let mut encoder = flate2::GzBuilder::new()
                .mtime(0)
                .operating_system(0)
                .write(Vec::new(), flate2::Compression::new(GZIP_LEVEL));
            encoder
                .write_all(input)
                .map_err(|e| compression_error(codec, e))?;
            encoder.finish().map_err(|e| compression_error(codec, e))
        }
        Compression::Snappy => {
            let mut out = Vec::with_capacity(XERIAL_HEADER_LEN + input.len());
            out.extend_from_slice(&XERIAL_MAGIC);
            out.extend_from_slice(&1i32.to_be_bytes());
            out.extend_from_slice(&1i32.to_be_bytes());
            let mut encoder = snap::raw::Encoder::new();
            for chunk in input.chunks(XERIAL_BLOCK_SIZE) {
                let block = encoder
                    .compress_vec(chunk)
                    .map_err(|e| compression_error(codec, e))?;
                let length = i32::try_from(block.len()).map_err(|_| EncodeError::TooLarge {
                    what: "snappy block",
                    size: block.len(),
                })?;
                out.extend_from_slice(&length.to_be_bytes());
                out.extend_from_slice(&block);
            }
            Ok(out)
        }
        Compression::Lz4 => {
            let info = lz4_flex::frame::FrameInfo::new()
                .block_size(lz4_flex::frame::BlockSize::Max64KB)
                .block_mode(lz4_flex::frame::BlockMode::Independent)
                .block_checksums(false)
                .content_checksum(false);
            let mut encoder = lz4_flex::frame::FrameEncoder::with_frame_info(info, Vec::new());
            encoder
                .write_all(input)
                .map_err(|e| compression_error(codec, e))?;
            encoder.finish().map_err(|e| compression_error(codec, e))
        }
        Compression::Zstd => {
            let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), ZSTD_LEVEL)
                .map_err(|e| compression_error(codec, e))?;
            encoder
                .include_checksum(false)
                .map_err(|e| compression_error(codec, e))?;
            encoder
                .include_contentsize(false)
                .map_err(|e| compression_error(codec, e))?;
            encoder
                .write_all(input)
                .map_err(|e| compression_error(codec, e))?;
            encoder.finish().map_err(|e| compression_error(codec, e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_codec_round_trips() {
        let input: Vec<u8> = (0..100_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        for codec in Compression::ALL {
            let packed = compress(codec, &input).unwrap();
            let unpacked = decompress(codec, &packed, &DecodeLimits::default()).unwrap();
            assert_eq!(unpacked, input, "{codec:?}");
        }
    }

    #[test]
    fn gzip_header_matches_java_gzip_output_stream() {
        let packed = compress(Compression::Gzip, b"hello").unwrap();
        assert_eq!(&packed[..10], &[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn lz4_frame_header_matches_kafka_lz4_block_output_stream() {
        let packed = compress(Compression::Lz4, b"hello").unwrap();
        // magic, FLG = version 01 + block independence, BD = 64 KiB, header checksum.
        assert_eq!(&packed[..6], &[0x04, 0x22, 0x4d, 0x18, 0x60, 0x40]);
        assert_eq!(&packed[packed.len() - 4..], &[0, 0, 0, 0], "end mark");
    }

    #[test]
    fn snappy_uses_xerial_framing_in_32_kib_blocks() {
        let input = vec![7u8; 70_000];
        let packed = compress(Compression::Snappy, &input).unwrap();
        assert_eq!(&packed[..8], &XERIAL_MAGIC);
        assert_eq!(&packed[8..16], &[0, 0, 0, 1, 0, 0, 0, 1]);
        assert_eq!(
            decompress(Compression::Snappy, &packed, &DecodeLimits::default()).unwrap(),
            input
        );
    }

    #[test]
    fn unknown_codec_ids_are_rejected() {
        for id in 5..=7 {
            assert_eq!(
                Compression::from_id(id),
                Err(DecodeError::UnsupportedCompression { id })
            );
        }
    }

    #[test]
    fn decompression_stops_at_the_limit_for_every_codec() {
        let input = vec![0u8; 1 << 20];
        let limits = DecodeLimits {
            max_uncompressed_records_bytes: 1000,
        };
        for codec in Compression::ALL {
            let packed = compress(codec, &input).unwrap();
            assert!(
                matches!(
                    decompress(codec, &packed, &limits),
                    Err(DecodeError::DecompressedTooLarge { limit: 1000, .. })
                ),
                "{codec:?}"
            );
        }
    }

    #[test]
    fn garbage_input_is_an_error_for_every_codec() {
        let garbage = [0xde, 0xad, 0xbe, 0xef, 1, 2, 3];
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            assert!(
                decompress(codec, &garbage, &DecodeLimits::default()).is_err(),
                "{codec:?}"
            );
        }
    }
}
