//! CRC-32C (Castagnoli), the checksum of Kafka's v2 batches, by whichever implementation is faster for the length
//! on the CPU it runs on.
//!
//! Two well-kept crates compute it: `crc32c` runs the SSE 4.2 / ARMv8 CRC instruction over three interleaved
//! streams, `crc-fast` folds the buffer with carry-less multiplication (PCLMULQDQ / PMULL, and 512-bit
//! VPCLMULQDQ where the CPU has it and AVX-512 VL). Measured in one program (GB/s, the best of five passes over a
//! hot buffer):
//!
//! | bytes | AMD EPYC, no VPCLMULQDQ: `crc32c` | `crc-fast` | Intel Xeon with VPCLMULQDQ: `crc32c` | `crc-fast` |
//! |---:|---:|---:|---:|---:|
//! | 70 | — | — | 5.6 | 8.6 |
//! | 256 | — | — | 16.0 | 19.2 |
//! | 1,003 | 4.50 | 3.97 | 12.8 | 26.3 |
//! | 1,536 | 4.74 | 4.87 | 16.4 | 30.4 |
//! | 2,048 | 4.99 | 5.42 | 12.2 | 43.2 |
//! | 16,384 | 4.71 | 6.89 | 16.1 | 66.3 |
//! | 65,536 | 5.15 | 7.09 | 17.5 | 73.0 |
//!
//! The CRC instruction's throughput is the ceiling of the first whatever the length; folding pays a fixed set-up
//! and then runs faster — from about 2 KiB with 128-bit PCLMULQDQ, from the shortest batches with VPCLMULQDQ
//! (`crc-fast` itself takes the CRC instruction up to 256 bytes there). [`crc32c()`] therefore folds from
//! [`FOLDING_FROM`] bytes, or from the first byte on a CPU with VPCLMULQDQ and AVX-512 VL. Both give the same value
//! for every input.

/// From this many bytes [`crc32c()`] folds (`crc-fast`) on a CPU without 512-bit carry-less multiplication; below,
/// it uses the CRC instruction (`crc32c`).
pub const FOLDING_FROM: usize = 2048;

/// True when this CPU folds 512 bits at a time (VPCLMULQDQ with AVX-512 VL): folding is then the faster way at
/// every length. The standard library caches the CPU's features, so this is a load and a test.
#[inline]
fn folds_wide() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("vpclmulqdq") && std::arch::is_x86_feature_detected!("avx512vl")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The CRC-32C of `bytes`.
#[inline]
pub fn crc32c(bytes: &[u8]) -> u32 {
    if bytes.len() < FOLDING_FROM && !folds_wide() {
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
        /// Either side of the switch, and across it, the value is the instruction's (on a CPU that folds wide,
        /// at every length the folding's).
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
