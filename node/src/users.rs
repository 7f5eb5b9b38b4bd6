//! SCRAM credentials and ACLs, durable: one JSON record each in the metadata of the internal partition
//! [`SECURITY_PARTITION`], rewritten whole (atomically and durably) on each change, as Kafka keeps them in its
//! metadata log. A credential is the salt, the iteration count, `StoredKey` and `ServerKey` (crate `kafka-auth`):
//! never a password. The ACLs are `kafka-auth`'s bindings, managed with CreateAcls and DeleteAcls
//! (`crate::api::acls`) and read by the broker's authorizer through [`Node::acls`].
//!
//! Served through DescribeUserScramCredentials and AlterUserScramCredentials (`kafka-configs --entity-type
//! users`), read by the broker's SASL authenticator through [`Node::scram_credentials`], and written before the
//! node runs by `mirrorlog users add` ([`add_offline`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_auth::acl::{AclBinding, AclSet};
use kafka_auth::{ScramCredential, ScramMechanism};
use partition_log::{LogConfig, PartitionLog};
use serde::{Deserialize, Serialize};
use storage::{PartitionId, Storage};

use crate::{Node, NodeError};

/// The internal partition holding the record.
pub const SECURITY_PARTITION: &str = "__mirrorlog_security";

/// The metadata key of the record.
const SCRAM_KEY: &str = "scram.credentials";

/// The record's format version.
const FORMAT_VERSION: u32 = 1;

/// The metadata key of the ACL record.
const ACL_KEY: &str = "acl.bindings";

#[derive(Debug, Serialize, Deserialize)]
struct AclRecord {
    version: u32,
    bindings: Vec<AclBinding>,
}

/// Every user's credentials, by user and mechanism.
pub type Credentials = BTreeMap<String, BTreeMap<ScramMechanism, ScramCredential>>;

#[derive(Debug, Serialize, Deserialize)]
struct Record {
    version: u32,
    users: Credentials,
}

/// The credentials and their store.
#[derive(Debug)]
pub(crate) struct SecurityStore {
    store: Option<PartitionLog>,
    /// Shared with authenticators; replaced whole on each change.
    users: Arc<Credentials>,
    /// Shared with authorizers; replaced whole on each change.
    acls: Arc<AclSet>,
}

impl SecurityStore {
    /// Reads the record from `store`.
    pub(crate) async fn open(store: PartitionLog) -> Result<Self, NodeError> {
        let users = read(&store).await?;
        let acls = read_acls(&store).await?;
        Ok(SecurityStore {
            store: Some(store),
            users: Arc::new(users),
            acls: Arc::new(acls),
        })
    }

    /// Every credential, as of now.
    pub(crate) fn snapshot(&self) -> Arc<Credentials> {
        self.users.clone()
    }

    /// Replaces the credentials with `users` (durable when this returns; nothing written when nothing changes).
    pub(crate) async fn replace(&mut self, users: Credentials) -> Result<(), NodeError> {
        if *self.users == users {
            return Ok(());
        }
        let store = self
            .store
            .as_mut()
            .ok_or_else(|| NodeError::Security("the node is closed".to_owned()))?;
        write(store, &users).await?;
        self.users = Arc::new(users);
        Ok(())
    }

    /// Every ACL, as of now.
    pub(crate) fn acls(&self) -> Arc<AclSet> {
        self.acls.clone()
    }

    /// Replaces the ACLs with `acls` (durable when this returns; nothing written when nothing changes).
    pub(crate) async fn replace_acls(&mut self, acls: AclSet) -> Result<(), NodeError> {
        if *self.acls == acls {
            return Ok(());
        }
        let store = self
            .store
            .as_mut()
            .ok_or_else(|| NodeError::Security("the node is closed".to_owned()))?;
        let record = serde_json::to_vec(&AclRecord {
            version: FORMAT_VERSION,
            bindings: acls.iter().cloned().collect(),
        })
        .map_err(|error| NodeError::Security(format!("cannot encode the ACL record: {error}")))?;
        store.put_metadata(ACL_KEY, &record).await?;
        self.acls = Arc::new(acls);
        Ok(())
    }

    /// Closes the store.
    pub(crate) async fn close(&mut self) -> Result<(), NodeError> {
        match self.store.take() {
            Some(store) => Ok(store.close().await?),
            None => Ok(()),
        }
    }
}

async fn read(store: &PartitionLog) -> Result<Credentials, NodeError> {
    let Some(bytes) = store.metadata(SCRAM_KEY).await? else {
        return Ok(Credentials::new());
    };
    let record: Record = serde_json::from_slice(&bytes)
        .map_err(|error| NodeError::Security(format!("the SCRAM credential record is corrupt: {error}")))?;
    if record.version != FORMAT_VERSION {
        return Err(NodeError::Security(format!(
            "the SCRAM credential record has format version {}, this build reads {FORMAT_VERSION}",
            record.version
        )));
    }
    Ok(record.users)
}

async fn read_acls(store: &PartitionLog) -> Result<AclSet, NodeError> {
    let Some(bytes) = store.metadata(ACL_KEY).await? else {
        return Ok(AclSet::new());
    };
    let record: AclRecord = serde_json::from_slice(&bytes)
        .map_err(|error| NodeError::Security(format!("the ACL record is corrupt: {error}")))?;
    if record.version != FORMAT_VERSION {
        return Err(NodeError::Security(format!(
            "the ACL record has format version {}, this build reads {FORMAT_VERSION}",
            record.version
        )));
    }
    Ok(record.bindings.into_iter().collect())
}

async fn write(store: &mut PartitionLog, users: &Credentials) -> Result<(), NodeError> {
    let record = serde_json::to_vec(&Record {
        version: FORMAT_VERSION,
        users: users.clone(),
    })
    .map_err(|error| NodeError::Security(format!("cannot encode the SCRAM credential record: {error}")))?;
    store.put_metadata(SCRAM_KEY, &record).await?;
    Ok(())
}

/// Opens (creating when missing) the security partition of `storage`.
pub(crate) async fn open_store(
    storage: &dyn Storage,
    existing: Option<&PartitionId>,
    config: LogConfig,
    now: i64,
) -> Result<PartitionLog, NodeError> {
    let partition = match existing {
        Some(id) => storage.open(id).await?,
        None => storage.create(&PartitionId::new(SECURITY_PARTITION, 0)?).await?,
    };
    Ok(PartitionLog::open(partition, config, now).await?.0)
}

/// Sets `user`'s credential for `mechanism` in the store of a node that is not running (`mirrorlog users add`,
/// for the first administrator, as Kafka's `kafka-storage format --add-scram`).
pub async fn add_offline(
    storage: &dyn Storage,
    user: &str,
    mechanism: ScramMechanism,
    credential: ScramCredential,
) -> Result<(), NodeError> {
    if user.is_empty() {
        return Err(NodeError::Security("the user name is empty".to_owned()));
    }
    let existing = storage
        .list()
        .await?
        .into_iter()
        .find(|id| id.topic() == SECURITY_PARTITION);
    let mut store = open_store(storage, existing.as_ref(), LogConfig::default(), 0).await?;
    let mut users = read(&store).await?;
    users
        .entry(user.to_owned())
        .or_default()
        .insert(mechanism, credential);
    let written = write(&mut store, &users).await;
    store.close().await?;
    written
}

impl Node {
    /// Every user's SCRAM credentials, as of now (a snapshot: later changes do not show in it).
    pub async fn scram_credentials(&self) -> Arc<Credentials> {
        self.users.read().await.snapshot()
    }

    /// Every ACL, as of now (a snapshot: later changes do not show in it).
    pub async fn acls(&self) -> Arc<AclSet> {
        self.users.read().await.acls()
    }

    /// Adds `add` to the ACLs and removes `remove` from them, in one durable write (a mirror link syncing its
    /// source's ACLs).
    pub async fn change_acls(&self, add: &[AclBinding], remove: &[AclBinding]) -> Result<(), NodeError> {
        let mut store = self.users.write().await;
        let mut next: AclSet = (*store.acls()).clone();
        for binding in remove {
            next.remove(binding);
        }
        next.extend(add.iter().cloned());
        store.replace_acls(next).await
    }
}
