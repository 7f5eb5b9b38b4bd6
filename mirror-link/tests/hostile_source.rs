//! A hostile source costs nothing: a response announcing 2 GiB is refused before it is read, and one claiming two
//! billion array elements in a few bytes is refused before `kafka-protocol` would allocate for them.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

use std::time::Duration;

use mirror_link::{KafkaConnection, LinkError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A server that answers the first request with `answer(correlation_id)` and then waits.
async fn hostile(answer: fn(i32) -> Vec<u8>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let size = stream.read_i32().await.unwrap();
        let mut request = vec![0u8; size as usize];
        stream.read_exact(&mut request).await.unwrap();
        let correlation_id = i32::from_be_bytes([request[4], request[5], request[6], request[7]]);
        stream.write_all(&answer(correlation_id)).await.unwrap();
        tokio::time::sleep(Duration::from_secs(5)).await;
    });
    address
}

async fn connect(address: &str) -> Result<KafkaConnection, LinkError> {
    KafkaConnection::connect(address, "test", Duration::from_secs(5), 1 << 20).await
}

#[tokio::test]
async fn a_response_announcing_two_gib_is_refused_before_it_is_read() {
    let address = hostile(|_| i32::MAX.to_be_bytes().to_vec()).await;
    let error = connect(&address).await.unwrap_err();
    assert!(matches!(error, LinkError::ResponseTooLarge { .. }), "{error}");
}

#[tokio::test]
async fn two_billion_api_versions_in_ten_bytes_are_refused_before_decoding() {
    let address = hostile(|correlation_id| {
        let mut frame = Vec::new();
        frame.extend_from_slice(&10i32.to_be_bytes());
        frame.extend_from_slice(&correlation_id.to_be_bytes());
        frame.extend_from_slice(&0i16.to_be_bytes()); // error_code
        frame.extend_from_slice(&i32::MAX.to_be_bytes()); // api_keys: two billion of them
        frame
    })
    .await;
    let error = connect(&address).await.unwrap_err();
    assert!(matches!(error, LinkError::Malformed { .. }), "{error}");
    assert!(error.to_string().contains("refused before decoding"), "{error}");
}

#[tokio::test]
async fn an_answer_to_another_request_is_refused() {
    let address = hostile(|correlation_id| {
        let mut frame = Vec::new();
        frame.extend_from_slice(&10i32.to_be_bytes());
        frame.extend_from_slice(&(correlation_id + 1).to_be_bytes());
        frame.extend_from_slice(&0i16.to_be_bytes());
        frame.extend_from_slice(&0i32.to_be_bytes());
        frame
    })
    .await;
    let error = connect(&address).await.unwrap_err();
    assert!(error.to_string().contains("correlation id"), "{error}");
}
