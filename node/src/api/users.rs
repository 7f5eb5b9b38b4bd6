//! DescribeUserScramCredentials and AlterUserScramCredentials: users' SCRAM credentials as `kafka-configs
//! --entity-type users` manages them (the client salts and iterates the password; the node keeps what the
//! credential needs, never the salted password).
//!
//! Per user, as Kafka's SCRAM control decides: an empty name or too few or too many iterations is
//! UNACCEPTABLE_CREDENTIAL, an unknown mechanism UNSUPPORTED_SASL_MECHANISM, the same user and mechanism twice in
//! one request DUPLICATE_RESOURCE, deleting a credential that does not exist RESOURCE_NOT_FOUND. A user takes one
//! change per request (a second one, even for the other mechanism, is DUPLICATE_RESOURCE unless the first was
//! already refused, as Kafka's controller decides); one durable write holds every change that applies.

use std::collections::{BTreeMap, BTreeSet};

use kafka_auth::{ScramCredential, ScramMechanism};
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::*;
use kafka_types::KafkaError;

use super::str_bytes;
use crate::node::Node;

/// DescribeUserScramCredentials: the mechanisms and iteration counts of the users asked (every user when none).
pub async fn describe_user_scram_credentials(
    node: &Node,
    request: DescribeUserScramCredentialsRequest,
    _version: i16,
) -> DescribeUserScramCredentialsResponse {
    let users = node.scram_credentials().await;
    let mut response = DescribeUserScramCredentialsResponse::default();
    let asked: Vec<String> = match request.users {
        Some(asked) if !asked.is_empty() => asked.iter().map(|user| user.name.as_str().to_owned()).collect(),
        _ => users.keys().cloned().collect(),
    };
    let mut seen = BTreeSet::new();
    let mut duplicated = BTreeSet::new();
    for user in &asked {
        if !seen.insert(user.as_str()) {
            duplicated.insert(user.as_str());
        }
    }
    let mut answered = BTreeSet::new();
    for user in &asked {
        if !answered.insert(user.as_str()) {
            continue;
        }
        let mut result = DescribeUserScramCredentialsResult::default();
        result.user = str_bytes(user);
        if duplicated.contains(user.as_str()) {
            result.error_code = KafkaError::DuplicateResource.code();
            result.error_message = Some(str_bytes(&format!(
                "Cannot describe SCRAM credentials for the same user twice in a single request: {user}"
            )));
        } else if let Some(credentials) = users.get(user) {
            result.credential_infos = credentials
                .iter()
                .map(|(mechanism, credential)| {
                    let mut info = CredentialInfo::default();
                    info.mechanism = mechanism.wire_type();
                    info.iterations = i32::try_from(credential.iterations).unwrap_or(i32::MAX);
                    info
                })
                .collect();
        } else {
            result.error_code = KafkaError::ResourceNotFound.code();
            result.error_message = Some(str_bytes(&format!(
                "Attempt to describe a user credential that does not exist: {user}"
            )));
        }
        response.results.push(result);
    }
    response
}

/// One change a request asks for.
enum Change {
    Delete,
    Upsert(ScramCredential),
}

/// AlterUserScramCredentials: deletions and upsertions, each user's all or nothing, durable when answered.
pub async fn alter_user_scram_credentials(
    node: &Node,
    request: AlterUserScramCredentialsRequest,
    _version: i16,
) -> AlterUserScramCredentialsResponse {
    // User → the first refusal of any of its changes, or its changes by mechanism.
    let mut order: Vec<String> = Vec::new();
    let mut refused: BTreeMap<String, (KafkaError, String)> = BTreeMap::new();
    let mut changes: BTreeMap<String, (ScramMechanism, Change)> = BTreeMap::new();
    let refuse = |refused: &mut BTreeMap<String, (KafkaError, String)>, user: &str, error, message: &str| {
        refused
            .entry(user.to_owned())
            .or_insert((error, message.to_owned()));
    };
    let asked = request
        .deletions
        .iter()
        .map(|deletion| (deletion.name.as_str(), deletion.mechanism, None))
        .chain(request.upsertions.iter().map(|upsertion| {
            (
                upsertion.name.as_str(),
                upsertion.mechanism,
                Some((
                    upsertion.iterations,
                    upsertion.salt.as_ref(),
                    upsertion.salted_password.as_ref(),
                )),
            )
        }));
    // Held from the checks to the write, so that a deletion's credential cannot vanish in between.
    let mut users = node.users.write().await;
    let current = users.snapshot();
    for (user, mechanism, upsertion) in asked {
        if !order.iter().any(|seen| seen == user) {
            order.push(user.to_owned());
        }
        if refused.contains_key(user) {
            continue;
        }
        if changes.contains_key(user) {
            refuse(
                &mut refused,
                user,
                KafkaError::DuplicateResource,
                "A user credential cannot be altered twice in the same request",
            );
            continue;
        }
        if user.is_empty() {
            refuse(
                &mut refused,
                user,
                KafkaError::UnacceptableCredential,
                "Username must not be empty",
            );
            continue;
        }
        let Some(mechanism) = ScramMechanism::from_wire_type(mechanism) else {
            refuse(
                &mut refused,
                user,
                KafkaError::UnsupportedSaslMechanism,
                "Unknown SCRAM mechanism",
            );
            continue;
        };
        let change = match upsertion {
            None if !current
                .get(user)
                .is_some_and(|held| held.contains_key(&mechanism)) =>
            {
                refuse(
                    &mut refused,
                    user,
                    KafkaError::ResourceNotFound,
                    "Attempt to delete a user credential that does not exist",
                );
                continue;
            }
            None => Change::Delete,
            Some((iterations, salt, salted_password)) => {
                if iterations < ScramMechanism::MIN_ITERATIONS as i32 {
                    refuse(
                        &mut refused,
                        user,
                        KafkaError::UnacceptableCredential,
                        "Too few iterations",
                    );
                    continue;
                }
                if iterations > ScramMechanism::MAX_ITERATIONS as i32 {
                    refuse(
                        &mut refused,
                        user,
                        KafkaError::UnacceptableCredential,
                        "Too many iterations",
                    );
                    continue;
                }
                match ScramCredential::from_salted_password(
                    mechanism,
                    salted_password,
                    salt.to_vec(),
                    iterations.unsigned_abs(),
                ) {
                    Ok(credential) => Change::Upsert(credential),
                    Err(error) => {
                        refuse(
                            &mut refused,
                            user,
                            KafkaError::UnacceptableCredential,
                            &error.to_string(),
                        );
                        continue;
                    }
                }
            }
        };
        changes.insert(user.to_owned(), (mechanism, change));
    }
    let mut next = (*current).clone();
    for (user, (mechanism, change)) in &changes {
        if refused.contains_key(user) {
            continue;
        }
        let held = next.entry(user.clone()).or_default();
        match change {
            Change::Delete => drop(held.remove(mechanism)),
            Change::Upsert(credential) => drop(held.insert(*mechanism, credential.clone())),
        }
        if held.is_empty() {
            next.remove(user);
        }
    }
    let written = users.replace(next).await;
    drop(users);
    let mut response = AlterUserScramCredentialsResponse::default();
    for user in order {
        let mut result = AlterUserScramCredentialsResult::default();
        result.user = str_bytes(&user);
        if let Some((error, message)) = refused.get(&user) {
            result.error_code = error.code();
            result.error_message = Some(str_bytes(message));
        } else if let Err(error) = &written {
            tracing::error!(%error, "cannot store SCRAM credentials");
            result.error_code = KafkaError::KafkaStorageError.code();
            result.error_message = Some(str_bytes("The credentials could not be stored."));
        }
        response.results.push(result);
    }
    response
}
