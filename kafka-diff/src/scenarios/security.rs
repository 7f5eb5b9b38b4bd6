//! Security scenarios on a PLAINTEXT connection: SASL requests outside an authentication, users' SCRAM
//! credentials managed as `kafka-configs --entity-type users` manages them, and the ACL APIs of a broker without
//! an authorizer.

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use serde_json::{json, Value};

use super::versions;
use crate::error::DiffError;
use crate::session::Session;

fn text(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

/// SaslHandshake and SaslAuthenticate at every version on a PLAINTEXT listener: ILLEGAL_SASL_STATE.
pub async fn sasl_requests_outside_authentication_every_version(
    session: &mut Session,
) -> Result<(), DiffError> {
    for version in versions(ApiKey::SaslHandshake) {
        let mut request = SaslHandshakeRequest::default();
        request.mechanism = text("SCRAM-SHA-512");
        let answer: SaslHandshakeResponse = session.call(ApiKey::SaslHandshake, version, &request).await?;
        let mechanisms: Vec<&str> = answer.mechanisms.iter().map(|name| name.as_str()).collect();
        session.observe(
            &format!("SaslHandshake v{version}"),
            json!({ "error": answer.error_code, "mechanisms": mechanisms }),
        );
    }
    for version in versions(ApiKey::SaslAuthenticate) {
        let mut request = SaslAuthenticateRequest::default();
        request.auth_bytes = bytes::Bytes::from_static(b"n,,n=alice,r=abc");
        let answer: SaslAuthenticateResponse =
            session.call(ApiKey::SaslAuthenticate, version, &request).await?;
        session.observe(
            &format!("SaslAuthenticate v{version}"),
            json!({
                "error": answer.error_code,
                "message": answer.error_message.as_ref().map(|message| message.as_str()),
                "auth_bytes": answer.auth_bytes.len(),
            }),
        );
    }
    Ok(())
}

fn upsertion(
    name: &str,
    mechanism: i8,
    iterations: i32,
) -> alter_user_scram_credentials_request::ScramCredentialUpsertion {
    let mut upsertion = alter_user_scram_credentials_request::ScramCredentialUpsertion::default();
    upsertion.name = text(name);
    upsertion.mechanism = mechanism;
    upsertion.iterations = iterations;
    upsertion.salt = bytes::Bytes::from_static(b"a salt of sixteen");
    upsertion.salted_password = bytes::Bytes::from_static(&[7; 32]);
    upsertion
}

fn deletion(name: &str, mechanism: i8) -> alter_user_scram_credentials_request::ScramCredentialDeletion {
    let mut deletion = alter_user_scram_credentials_request::ScramCredentialDeletion::default();
    deletion.name = text(name);
    deletion.mechanism = mechanism;
    deletion
}

/// An Alter answer's results, sorted by user, with the user names relative to the session.
fn altered(session: &Session, answer: &AlterUserScramCredentialsResponse) -> Value {
    let prefix = session.transactional_id("");
    let mut results: Vec<(String, i16, Option<String>)> = answer
        .results
        .iter()
        .map(|result| {
            (
                result.user.as_str().trim_start_matches(&prefix).to_owned(),
                result.error_code,
                result.error_message.as_ref().map(|message| message.to_string()),
            )
        })
        .collect();
    results.sort();
    json!(results
        .into_iter()
        .map(|(user, error, message)| json!({ "user": user, "error": error, "message": message }))
        .collect::<Vec<_>>())
}

/// A Describe answer's results for this session's users, sorted.
fn described(session: &Session, answer: &DescribeUserScramCredentialsResponse) -> Value {
    let prefix = session.transactional_id("");
    let mut results: Vec<Value> = answer
        .results
        .iter()
        .filter(|result| result.user.as_str().starts_with(&prefix))
        .map(|result| {
            let mut infos: Vec<(i8, i32)> = result
                .credential_infos
                .iter()
                .map(|info| (info.mechanism, info.iterations))
                .collect();
            infos.sort();
            json!({
                "user": result.user.as_str().trim_start_matches(&prefix),
                "error": result.error_code,
                "message": result.error_message.as_ref().map(|message| message.as_str()),
                "credentials": infos,
            })
        })
        .collect();
    results.sort_by_key(|value| value["user"].as_str().map(str::to_owned));
    json!({ "error": answer.error_code, "results": results })
}

/// AlterUserScramCredentials and DescribeUserScramCredentials: credentials set, refused (an unknown mechanism,
/// too few and too many iterations, the same credential twice, a deletion of nothing), described, deleted.
pub async fn user_scram_credentials(session: &mut Session) -> Result<(), DiffError> {
    let user = |suffix: &str| session.transactional_id(suffix);
    let (alice, bob, carol, dave, erin) = (
        user("alice"),
        user("bob"),
        user("carol"),
        user("dave"),
        user("erin"),
    );
    let mut request = AlterUserScramCredentialsRequest::default();
    request.upsertions = vec![
        upsertion(&alice, 1, 4096),
        upsertion(&alice, 2, 8192),
        upsertion(&bob, 3, 4096),
        upsertion(&carol, 1, 100),
        upsertion(&carol, 2, 20_000),
        upsertion(&dave, 1, 4096),
        upsertion(&dave, 1, 4096),
    ];
    request.deletions = vec![deletion(&erin, 1)];
    let answer: AlterUserScramCredentialsResponse = session
        .call(ApiKey::AlterUserScramCredentials, 0, &request)
        .await?;
    let seen = altered(session, &answer);
    session.observe("alter: set and refused", seen);
    let mut asked = DescribeUserScramCredentialsRequest::default();
    let name = |text_value: &str| {
        let mut name = describe_user_scram_credentials_request::UserName::default();
        name.name = text(text_value);
        name
    };
    asked.users = Some(vec![name(&alice), name(&bob), name(&alice)]);
    let answer: DescribeUserScramCredentialsResponse = session
        .call(ApiKey::DescribeUserScramCredentials, 0, &asked)
        .await?;
    let seen = described(session, &answer);
    session.observe("describe: alice twice, bob unknown", seen);
    asked.users = Some(vec![name(&alice), name(&bob)]);
    let answer: DescribeUserScramCredentialsResponse = session
        .call(ApiKey::DescribeUserScramCredentials, 0, &asked)
        .await?;
    let seen = described(session, &answer);
    session.observe("describe: alice, bob", seen);
    let mut request = AlterUserScramCredentialsRequest::default();
    request.deletions = vec![deletion(&alice, 1), deletion(&alice, 2)];
    let answer: AlterUserScramCredentialsResponse = session
        .call(ApiKey::AlterUserScramCredentials, 0, &request)
        .await?;
    let seen = altered(session, &answer);
    session.observe("alter: alice deleted", seen);
    asked.users = Some(vec![name(&alice)]);
    let answer: DescribeUserScramCredentialsResponse = session
        .call(ApiKey::DescribeUserScramCredentials, 0, &asked)
        .await?;
    let seen = described(session, &answer);
    session.observe("describe: alice gone", seen);
    Ok(())
}

/// DescribeAcls, CreateAcls and DeleteAcls at every version on a broker without an authorizer: SECURITY_DISABLED
/// (the authorization set, `kafka-diff --authorization`, drives them against authorizing brokers).
pub async fn acl_apis_without_an_authorizer_every_version(session: &mut Session) -> Result<(), DiffError> {
    use super::authorization::{create_read_acl, delete_every_acl, describe_every_acl};
    let topic = session.topic("acls");
    for version in versions(ApiKey::DescribeAcls) {
        let answer: DescribeAclsResponse = session
            .call(ApiKey::DescribeAcls, version, &describe_every_acl())
            .await?;
        session.observe(
            &format!("DescribeAcls v{version}"),
            json!({ "error": answer.error_code, "resources": answer.resources.len() }),
        );
    }
    for version in versions(ApiKey::CreateAcls) {
        let answer: CreateAclsResponse = session
            .call(ApiKey::CreateAcls, version, &create_read_acl(&topic))
            .await?;
        let codes: Vec<i16> = answer.results.iter().map(|result| result.error_code).collect();
        session.observe(&format!("CreateAcls v{version}"), json!(codes));
    }
    for version in versions(ApiKey::DeleteAcls) {
        let answer: DeleteAclsResponse = session
            .call(ApiKey::DeleteAcls, version, &delete_every_acl())
            .await?;
        let codes: Vec<(i16, usize)> = answer
            .filter_results
            .iter()
            .map(|result| (result.error_code, result.matching_acls.len()))
            .collect();
        session.observe(&format!("DeleteAcls v{version}"), json!(codes));
    }
    Ok(())
}
