//! CRC-32C (Castagnoli), the checksum of Kafka's v2 batches, by whichever implementation is faster for the length.
//!
//! Two well-kept crates compute it: `crc32c` runs the SSE 4.2 / ARMv8 CRC instruction over three interleaved
//! streams, `crc-fast` folds the buffer with carry-less multiplication (PCLMULQDQ / PMULL). On this project's
//! machine (AMD EPYC without VPCLMULQDQ, measured in one program, GB/s):
//!
//! | bytes | `crc32c` | `crc-fast` |
//! |---:|---:|---:|
//! | 1,003 | 4.50 | 3.97 |
//! | 1,536 | 4.74 | 4.87 |
//! | 2,048 | 4.99 | 5.42 |
//! | 4,096 | 4.74 | 5.95 |
//! | 16,384 | 4.71 | 6.89 |
//! | 65,536 | 5.15 | 7.09 |
//!
//! The CRC instruction's throughput is the ceiling of the first whatever the length; folding pays a fixed set-up
//! and then runs faster. [`crc32c`] switches at [`FOLDING_FROM`] bytes. Both give the same value for every input.

/// From this many bytes [`crc32c`] folds (`crc-fast`); below, it uses the CRC instruction (`crc32c`).
pub const FOLDING_FROM: usize = 2048;

/// The CRC-32C of `bytes`.
#[inline]
pub fn crc32c(bytes: &[u8]) -> u32 {
    if bytes.len() < FOLDING_FROM {
        ::crc32c::crc32c(bytes)
    } else {
        // A CRC-32 in the low 32 bits of the u64 `crc-fast` returns for every 32-bit algorithm.
        crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, bytes) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_catalogue_check_value_the_empty_input_and_a_long_input() {
        // The catalogue's check value: CRC-32C of the ASCII digits 1 to 9.
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(b""), 0);
        let long: Vec<u8> = b"123456789".iter().copied().cycle().take(9 * 1000).collect();
        assert_eq!(crc32c(&long), ::crc32c::crc32c(&long));
    }

    proptest! {
        /// Either side of the switch, and across it, the value is the instruction's.
        #[test]
        fn both_implementations_agree_on_any_bytes(
            bytes in proptest::collection::vec(any::<u8>(), 0..3 * FOLDING_FROM),
            start in 0usize..64,
        ) {
            let slice = &bytes[start.min(bytes.len())..];
            prop_assert_eq!(crc32c(slice), ::crc32c::crc32c(slice));
        }
    }
}
