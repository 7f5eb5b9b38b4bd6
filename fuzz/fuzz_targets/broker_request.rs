//! `mirrorlog serve`'s request decoder: any frame goes through the header parser, the shape check and
//! `kafka-protocol`'s decoder without panicking or allocating from an unchecked count.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(request) = broker::frame::parse_request(bytes::Bytes::copy_from_slice(data)) {
        let _ = broker::decode(&request);
    }
});
