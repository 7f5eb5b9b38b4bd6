//! A mirror link to a secured source: the source `serve` has only a SASL_SSL listener (SCRAM, a test CA), the
//! link takes a Kafka client properties file (`mirror create --source-config`), stored self-contained with the
//! link and shown redacted; it catches up byte for byte, survives the destination's restart (the settings are
//! durable) and fails over with its barrier. A wrong password is refused at `create` with the source's error,
//! and a second link to the same source with other settings is refused.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

mod common;

use std::time::Duration;

use broker::{BrokerConfig, ListenerConfig, TlsConfig};
use common::mirror::{admin, config, log_bytes, log_end, produce_records, serve, serve_with, until_log_end};
use common::pki::pki;
use kafka_auth::{ScramCredential, ScramMechanism};
use node::mirror::AdminRequest;

const TOPIC: &str = "orders";

/// A source whose only listener is SASL_SSL, with the users `mirror` (password `secret`) and `mirror2`
/// (password `rotated`).
async fn secured_source(dir: &std::path::Path, tls: TlsConfig) -> common::mirror::Serving {
    let node = config(&dir.join("a"), "cluster-a", &[(TOPIC, 2)]);
    {
        let store = node.storage.open().unwrap();
        for (user, password) in [("mirror", "secret"), ("mirror2", "rotated")] {
            let credential =
                ScramCredential::generate(ScramMechanism::Sha512, password.as_bytes(), 4096).unwrap();
            node::users::add_offline(store.as_ref(), user, ScramMechanism::Sha512, credential)
                .await
                .unwrap();
        }
    }
    let mut broker = BrokerConfig::new("127.0.0.1:0".parse().unwrap(), node.storage.clone());
    broker.listeners = vec!["SASL_SSL://127.0.0.1:0".parse::<ListenerConfig>().unwrap()];
    broker.tls = Some(tls);
    broker.node = node;
    serve_with(broker).await
}

/// The link's properties file: SCRAM-SHA-512 as `mirror` with `password`, the CA by a relative path.
fn properties(dir: &std::path::Path, password: &str) -> std::path::PathBuf {
    properties_of(dir, "mirror", password)
}

/// The link's properties file: SCRAM-SHA-512 as `user` with `password`, the CA by a relative path.
fn properties_of(dir: &std::path::Path, user: &str, password: &str) -> std::path::PathBuf {
    let path = dir.join(format!("source-{user}-{password}.properties"));
    std::fs::write(
        &path,
        format!(
            "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n\
             sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
             username=\"{user}\" password=\"{password}\";\nssl.truststore.type=PEM\nssl.truststore.location=ca.pem\n"
        ),
    )
    .unwrap();
    path
}

fn create(link: &str, source: &str, settings: std::collections::BTreeMap<String, String>) -> AdminRequest {
    AdminRequest::Create {
        link: link.to_owned(),
        source: source.to_owned(),
        topics: vec![TOPIC.to_owned()],
        source_config: settings,
        include: Vec::new(),
        exclude: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_reaches_a_sasl_ssl_source_catches_up_restarts_and_fails_over() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path());
    let tls = TlsConfig {
        cert: pki.cert.clone(),
        key: pki.key.clone(),
        client_ca: None,
    };
    let (a_address, a, a_stop, a_task) = secured_source(dir.path(), tls).await;
    for partition in 0..2 {
        assert_eq!(produce_records(&a, TOPIC, partition, 10).await, 0);
    }
    let good = mirror_link::security::self_contained(&properties(dir.path(), "secret")).unwrap();
    assert!(
        good.contains_key("ssl.truststore.certificates"),
        "the CA is stored with the link, not its path"
    );
    let bad = mirror_link::security::self_contained(&properties(dir.path(), "guess")).unwrap();

    // A wrong password: refused at create, with the source's answer, and nothing created.
    let (c_address, c, c_stop, c_task) = serve(config(&dir.path().join("c"), "cluster-c", &[]), None).await;
    let refused = admin(&c_address, create("wrong", &a_address, bad.clone())).await;
    assert!(!refused.ok);
    let message = refused.error.as_ref().unwrap().message.clone();
    assert!(message.contains("SASL_AUTHENTICATION_FAILED"), "{message}");
    assert!(!message.contains("guess"), "{message}");
    assert!(
        c.partition(TOPIC, 0).await.is_none(),
        "no mirror topic for a refused link"
    );

    let b_config = config(&dir.path().join("b"), "cluster-b", &[]);
    let (b_address, b, b_stop, b_task) = serve(b_config.clone(), None).await;
    let created = admin(&b_address, create("a-to-b", &a_address, good.clone())).await;
    assert!(created.ok, "{created:?}");
    let shown = created.links[0].source_config.join(",");
    assert!(shown.contains("sasl.jaas.config=[redacted]"), "{shown}");
    assert!(!shown.contains("secret") && !shown.contains("BEGIN"), "{shown}");
    // Another link to the same source must take the same settings.
    let conflicting = admin(&b_address, create("other", &a_address, bad)).await;
    assert!(!conflicting.ok);
    assert!(conflicting
        .error
        .unwrap()
        .message
        .contains("other client settings"));
    for partition in 0..2 {
        until_log_end(&b, TOPIC, partition, 10, Duration::from_secs(30)).await;
        assert_eq!(
            log_bytes(&b, TOPIC, partition).await,
            log_bytes(&a, TOPIC, partition).await
        );
    }

    // The destination restarts: the link's settings are durable, it reaches the source again.
    b_stop.send(()).unwrap();
    b_task.await.unwrap();
    drop(b);
    let (b_address, b, b_stop, b_task) = serve(b_config, None).await;
    assert_eq!(produce_records(&a, TOPIC, 0, 5).await, 0);
    until_log_end(&b, TOPIC, 0, 15, Duration::from_secs(30)).await;
    assert_eq!(log_bytes(&b, TOPIC, 0).await, log_bytes(&a, TOPIC, 0).await);

    let failover = admin(
        &b_address,
        AdminRequest::Failover {
            link: "a-to-b".to_owned(),
            topics: Vec::new(),
        },
    )
    .await;
    assert!(failover.ok, "{failover:?}");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let described = admin(
            &b_address,
            AdminRequest::Describe {
                link: "a-to-b".to_owned(),
                topics: Vec::new(),
            },
        )
        .await;
        let stopped = described.links[0]
            .partitions
            .iter()
            .all(|partition| partition.state == "STOPPED" && partition.barrier_offset.is_some());
        if stopped {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{described:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        produce_records(&b, TOPIC, 0, 1).await,
        0,
        "writable after the failover"
    );
    assert!(
        log_end(&b, TOPIC, 0).await > 16,
        "the barrier, then the new record"
    );
    common::mirror::stop_all(vec![(b_stop, b_task), (c_stop, c_task), (a_stop, a_task)]).await;
}

fn alter_client(link: &str, settings: std::collections::BTreeMap<String, String>) -> AdminRequest {
    AdminRequest::Alter {
        link: link.to_owned(),
        set: Default::default(),
        delete: Vec::new(),
        source_config: Some(settings),
    }
}

/// Issue 53, item 5: a link's source credentials rotated with `mirror alter --source-config`. Settings that do not
/// reach the source (a wrong password) are refused with the source's answer and change nothing. The old user is
/// then revoked at the source: the restarted destination's link fails (a refused authentication is final), and the
/// new settings, once altered in, bring its partitions back at once; they are durable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotated_source_credentials_are_checked_then_revive_a_link_the_old_ones_failed() {
    use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialDeletion;
    use kafka_protocol::messages::AlterUserScramCredentialsRequest;

    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path());
    let tls = TlsConfig {
        cert: pki.cert.clone(),
        key: pki.key.clone(),
        client_ca: None,
    };
    let (a_address, a, a_stop, a_task) = secured_source(dir.path(), tls).await;
    assert_eq!(produce_records(&a, TOPIC, 0, 10).await, 0);
    let settings = |user: &str, password: &str| {
        mirror_link::security::self_contained(&properties_of(dir.path(), user, password)).unwrap()
    };
    let b_config = config(&dir.path().join("b"), "cluster-b", &[]);
    let (b_address, b, b_stop, b_task) = serve(b_config.clone(), None).await;
    let created = admin(
        &b_address,
        create("a-to-b", &a_address, settings("mirror", "secret")),
    )
    .await;
    assert!(created.ok, "{created:?}");
    until_log_end(&b, TOPIC, 0, 10, Duration::from_secs(30)).await;

    let refused = admin(&b_address, alter_client("a-to-b", settings("mirror2", "guess"))).await;
    assert!(!refused.ok);
    let message = refused.error.as_ref().unwrap().message.clone();
    assert!(message.contains("SASL_AUTHENTICATION_FAILED"), "{message}");
    assert!(!message.contains("guess"), "{message}");
    assert_eq!(produce_records(&a, TOPIC, 0, 5).await, 0);
    until_log_end(&b, TOPIC, 0, 15, Duration::from_secs(30)).await;

    // The old user is revoked at the source; the destination restarts and can no longer authenticate.
    let mut deletion = ScramCredentialDeletion::default();
    deletion.name = kafka_protocol::protocol::StrBytes::from_static_str("mirror");
    deletion.mechanism = 2;
    let mut request = AlterUserScramCredentialsRequest::default();
    request.deletions.push(deletion);
    let deleted = a.alter_user_scram_credentials(request, 0).await;
    assert_eq!(deleted.results[0].error_code, 0, "{deleted:?}");
    b_stop.send(()).unwrap();
    b_task.await.unwrap();
    drop(b);
    let (b_address, b, b_stop, b_task) = serve(b_config.clone(), None).await;
    let describe = AdminRequest::Describe {
        link: "a-to-b".to_owned(),
        topics: Vec::new(),
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let described = admin(&b_address, describe.clone()).await;
        let failed = described.links[0]
            .partitions
            .iter()
            .all(|partition| partition.state == "FAILED");
        if failed {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{described:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let rotated = admin(&b_address, alter_client("a-to-b", settings("mirror2", "rotated"))).await;
    assert!(rotated.ok, "{rotated:?}");
    let shown = rotated.links[0].source_config.join(",");
    assert!(
        shown.contains("sasl.jaas.config=[redacted]") && !shown.contains("rotated"),
        "{shown}"
    );
    assert_eq!(produce_records(&a, TOPIC, 0, 5).await, 0);
    until_log_end(&b, TOPIC, 0, 20, Duration::from_secs(30)).await;

    // Durable: a restarted destination reaches the source as `mirror2`.
    b_stop.send(()).unwrap();
    b_task.await.unwrap();
    drop(b);
    let (_, b, b_stop, b_task) = serve(b_config, None).await;
    assert_eq!(produce_records(&a, TOPIC, 0, 5).await, 0);
    until_log_end(&b, TOPIC, 0, 25, Duration::from_secs(30)).await;
    assert_eq!(log_bytes(&b, TOPIC, 0).await, log_bytes(&a, TOPIC, 0).await);
    common::mirror::stop_all(vec![(b_stop, b_task), (a_stop, a_task)]).await;
}
