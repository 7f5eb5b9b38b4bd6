//! The metrics endpoint: HTTP/1.1 (`hyper`) on the address `serve --metrics-listen` names, `GET /metrics`
//! answered with the scrape's text, anything else 404 (405 for another method on `/metrics`). No TLS and no
//! authentication, as Prometheus exporters usually run: bind it to loopback or a management network. A client gets
//! 10 s to send its request head; the answer is built from state (the mirror links answer from memory), so a
//! scrape costs no source a request.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{ALLOW, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use node::mirror::AdminRequest;
use node::Node;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::BrokerMetrics;
use crate::mirror::MirrorService;

/// OpenMetrics text, as `prometheus-client` encodes it (Prometheus asks for it and reads it).
const CONTENT_TYPE_OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// How long a client may take to send its request head.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// What a scrape reads.
#[derive(Clone)]
pub(crate) struct Scraped {
    pub(crate) metrics: Arc<BrokerMetrics>,
    pub(crate) node: Arc<Node>,
    pub(crate) mirror: Arc<MirrorService>,
}

/// Serves scrapes on `listener` until `stopped` changes; connections still open then are closed with it.
pub(crate) async fn serve(listener: TcpListener, scraped: Scraped, mut stopped: watch::Receiver<bool>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = stopped.changed() => return,
            accepted = listener.accept() => {
                let Ok((stream, _peer)) = accepted else {
                    // Out of descriptors: the Kafka listeners say so; a scrape is retried by its scraper.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                };
                let scraped = scraped.clone();
                connections.spawn(async move {
                    let service = service_fn(move |request| answer(request, scraped.clone()));
                    let _ = http1::Builder::new()
                        .timer(TokioTimer::new())
                        .header_read_timeout(HEADER_READ_TIMEOUT)
                        .keep_alive(false)
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn answer(request: Request<Incoming>, scraped: Scraped) -> Result<Response<Full<Bytes>>, Infallible> {
    let response = if request.uri().path() != "/metrics" {
        plain(StatusCode::NOT_FOUND, "not found: the metrics are at /metrics\n")
    } else if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "GET /metrics\n");
        response
            .headers_mut()
            .insert(ALLOW, hyper::header::HeaderValue::from_static("GET, HEAD"));
        response
    } else {
        let links = scraped.mirror.handle(AdminRequest::List).await.links;
        let text = scraped.metrics.render(&scraped.node, &links).await;
        let mut response = Response::new(Full::new(Bytes::from(text)));
        response.headers_mut().insert(
            CONTENT_TYPE,
            hyper::header::HeaderValue::from_static(CONTENT_TYPE_OPENMETRICS),
        );
        response
    };
    Ok(response)
}

fn plain(status: StatusCode, text: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
    *response.status_mut() = status;
    response
}
