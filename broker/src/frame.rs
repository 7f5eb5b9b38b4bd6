//! Kafka's framing: a 4-byte big-endian size, then the request (header + body) or response.
//!
//! A frame is read as its bytes arrive (memory follows what the peer actually sent, not what its size field
//! claims), and a size above `max_request_bytes` or below the smallest header closes the connection, as Kafka's
//! socket server does.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::Encodable;
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::shape;

/// What a frame buffer starts with (librdkafka's produce requests are up to 1 MB by default).
const INITIAL_FRAME_CAPACITY: usize = 1 << 20;

/// The smallest request: API key, version, correlation id, client id length.
const MIN_REQUEST_BYTES: usize = 10;

/// Why a connection must close.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The size field is negative, smaller than a header, or above the limit.
    #[error("a frame of {size} bytes (accepted: {min}..={max})")]
    BadSize {
        /// The size field.
        size: i64,
        /// The smallest accepted.
        min: usize,
        /// The limit.
        max: usize,
    },
    /// The peer closed the connection in the middle of a frame.
    #[error("the connection closed inside a frame ({got} of {size} bytes)")]
    Truncated {
        /// Bytes received.
        got: usize,
        /// Bytes announced.
        size: usize,
    },
    /// A socket error.
    #[error("socket: {0}")]
    Io(#[from] std::io::Error),
    /// The header cannot be read.
    #[error("request header: {0}")]
    Header(String),
}

/// Reads one request frame; `None` when the peer closed the connection between frames.
pub async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    max: usize,
) -> Result<Option<Bytes>, FrameError> {
    read_sized(reader, MIN_REQUEST_BYTES, max).await
}

/// Reads one raw SASL token frame (after a SaslHandshake v0: a size, then the token, no request header).
pub async fn read_sasl_token<R: AsyncRead + Unpin>(
    reader: &mut R,
    max: usize,
) -> Result<Option<Bytes>, FrameError> {
    read_sized(reader, 0, max).await
}

/// Reads a size-prefixed frame of `min..=max` bytes.
async fn read_sized<R: AsyncRead + Unpin>(
    reader: &mut R,
    min: usize,
    max: usize,
) -> Result<Option<Bytes>, FrameError> {
    let mut size = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        let n = reader.read(&mut size[got..]).await?;
        if n == 0 {
            return if got == 0 {
                Ok(None)
            } else {
                Err(FrameError::Truncated { got, size: 4 })
            };
        }
        got += n;
    }
    let size = i64::from(i32::from_be_bytes(size));
    if size < min as i64 || size > max as i64 {
        return Err(FrameError::BadSize { size, min, max });
    }
    let size = size as usize;
    // Room for a typical request up front; a larger one grows as its bytes arrive (never from the size field
    // alone: a peer announcing 100 MiB and sending nothing costs nothing).
    let mut frame = Vec::with_capacity(size.min(INITIAL_FRAME_CAPACITY));
    let got = reader.take(size as u64).read_to_end(&mut frame).await?;
    if got < size {
        return Err(FrameError::Truncated { got, size });
    }
    Ok(Some(Bytes::from(frame)))
}

/// A request's header, and its body still encoded.
#[derive(Debug, Clone)]
pub struct Request {
    /// The API key as sent (it may name no API).
    pub api_key: i16,
    /// The API version.
    pub version: i16,
    /// Echoed in the response.
    pub correlation_id: i32,
    /// The client's name.
    pub client_id: Option<String>,
    /// The body (after the header, including a flexible header's tagged fields).
    pub body: Bytes,
}

impl Request {
    /// The API, if the key names one.
    pub fn key(&self) -> Option<ApiKey> {
        ApiKey::try_from(self.api_key).ok()
    }
}

/// Reads the header of a frame. The header's version follows the API and version (flexible requests carry a
/// tagged-field section after the client id); for an API or version the broker does not serve, only the fixed
/// part is read and the body is left as it is.
pub fn parse_request(frame: Bytes) -> Result<Request, FrameError> {
    let short = || FrameError::Header("shorter than a request header".to_owned());
    let [k0, k1, v0, v1, c0, c1, c2, c3, l0, l1, ..] = frame[..] else {
        return Err(short());
    };
    let api_key = i16::from_be_bytes([k0, k1]);
    let version = i16::from_be_bytes([v0, v1]);
    let correlation_id = i32::from_be_bytes([c0, c1, c2, c3]);
    let client_id_len = i16::from_be_bytes([l0, l1]);
    let mut at = MIN_REQUEST_BYTES;
    let client_id = if client_id_len < 0 {
        None
    } else {
        let end = at + client_id_len as usize;
        let bytes = frame.get(at..end).ok_or_else(short)?;
        at = end;
        Some(String::from_utf8_lossy(bytes).into_owned())
    };
    let flexible = ApiKey::try_from(api_key)
        .ok()
        .filter(|key| crate::versions::supported(*key, version))
        .is_some_and(|key| key.request_header_version(version) >= 2);
    if flexible {
        let tagged = frame.get(at..).ok_or_else(short)?;
        at += shape::tagged_section_len(tagged).map_err(|e| FrameError::Header(e.to_string()))?;
    }
    Ok(Request {
        api_key,
        version,
        correlation_id,
        client_id,
        body: frame.slice(at..),
    })
}

/// Encodes a response frame: size, correlation id, the response header's tagged fields when it is flexible, body.
pub fn encode_response<M: Encodable>(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    message: &M,
) -> Result<Bytes, String> {
    let header_version = key.response_header_version(version);
    // Sized once: a Fetch answer of megabytes grown by doubling would be copied several times over.
    let body = message.compute_size(version).map_err(|error| error.to_string())?;
    let mut out = BytesMut::with_capacity(body.saturating_add(9));
    out.put_i32(0);
    out.put_i32(correlation_id);
    if header_version >= 1 {
        out.put_u8(0); // no tagged fields
    }
    message
        .encode(&mut out, version)
        .map_err(|error| error.to_string())?;
    let size = (out.len() - 4) as i32;
    out[..4].copy_from_slice(&size.to_be_bytes());
    Ok(out.freeze())
}
