//! Consumer groups, the classic protocol: members join (JoinGroup), the leader's assignment reaches every member
//! (SyncGroup), members prove they live (Heartbeat) and leave (LeaveGroup). One [`Membership`] per node holds
//! every group's generation, members and state:
//!
//! ```text
//! Empty ──join──> PreparingRebalance ──every member rejoined, or the rebalance timeout──> CompletingRebalance
//!   ^                 ^      (members that did not rejoin are removed; generation + 1)        │ leader's SyncGroup
//!   └─ last member ───┴──── a join with new metadata, a leave, a session that expired ─── Stable <┘
//! ```
//!
//! A JoinGroup or a follower's SyncGroup that must wait gets a receiver its caller awaits; the answer comes when
//! the rebalance completes (a join, a leave or [`Membership::tick`] on the node's clock). New members of version
//! 4 and above first get a member id with MEMBER_ID_REQUIRED (KIP-394). Static members (`group.instance.id`)
//! keep their place across restarts of the client: a join with a known instance id replaces the old member id,
//! and the old id is fenced; in a Stable group whose protocol it leaves as it is, nothing rebalances (KIP-345:
//! the member gets the current generation, and the leader id as it was, so a returning leader does not assign).
//!
//! Durability follows Kafka's group metadata: a group is stored ([`StoredGroup`], written by the node into the
//! offset log of `node::offsets`) when a rebalance completes (the leader's assignment reached the group), when
//! it empties, and when a static member comes back under a new id; [`Membership::take_unstored`] hands out what
//! changed since. A restarted node restores each stored group ([`Membership::restore`]): a stable group keeps its
//! generation, members and assignments, and each member's session starts again from the restart, so members that
//! still heartbeat carry on without a rebalance and those that are gone expire.
//!
//! **The initial rebalance delay** (`group.initial.rebalance.delay.ms`, Kafka's 3 s): a rebalance that starts from
//! Empty does not complete when everyone has joined but when the delay passes, so that consumers started together
//! land in one generation instead of one rebalance each. While the group has never completed a rebalance
//! (generation 0), a member that joins during the delay extends it by another delay, up to the members' rebalance
//! timeout in all — Kafka's `InitialDelayedJoin` rule. With a delay of 0 the first join completes at once.
//!
//! Deliberately not here: the consumer protocol of KIP-848.

use std::collections::BTreeMap;
use std::sync::Mutex;

use bytes::Bytes;
use kafka_types::KafkaError;
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

/// The shortest session timeout a member may ask for (Kafka's `group.min.session.timeout.ms`).
pub const MIN_SESSION_TIMEOUT_MS: i32 = 6_000;
/// The longest (Kafka's `group.max.session.timeout.ms`).
pub const MAX_SESSION_TIMEOUT_MS: i32 = 1_800_000;
/// The most members one group holds (Kafka's `group.max.size` is unbounded by default; a bound keeps a hostile
/// client from growing a group without end).
pub const MAX_MEMBERS: usize = 10_000;
/// The largest protocol metadata or assignment kept per member.
pub const MAX_MEMBER_BYTES: usize = 1 << 20;

/// A group's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    /// No members.
    Empty,
    /// Waiting for members to (re)join.
    PreparingRebalance,
    /// Joined; waiting for the leader's assignment.
    CompletingRebalance,
    /// Every member has its assignment.
    Stable,
}

impl GroupState {
    /// Kafka's name, as DescribeGroups answers it.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
        }
    }
}

/// How a group's committed offsets expire after `offsets.retention.minutes` (Kafka's `GroupMetadata.
/// removeExpiredOffsets`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OffsetExpiry {
    /// No group by that name here: a standalone consumer that only stores offsets; each expires counted from
    /// its commit.
    Standalone,
    /// An Empty group since then: its offsets expire counted from that moment (or from their commit, if later).
    EmptySince(i64),
    /// A Stable consumer group: its offsets on topics none of its members subscribes to expire counted from their
    /// commit; the others are kept.
    Unsubscribed(std::collections::BTreeSet<String>),
    /// Kept: a rebalance in progress, or members whose subscriptions cannot be read.
    Keep,
}

/// What a member sends in JoinGroup.
#[derive(Debug, Clone)]
pub struct JoinRequest {
    /// The group.
    pub group: String,
    /// Empty for a new member.
    pub member_id: String,
    /// `group.instance.id` of a static member.
    pub instance_id: Option<String>,
    /// The client's id (its request header's).
    pub client_id: String,
    /// Where the client connects from, as Kafka writes it (`/127.0.0.1`).
    pub client_host: String,
    /// How long the member may stay silent.
    pub session_timeout_ms: i32,
    /// How long a rebalance waits for the member to rejoin.
    pub rebalance_timeout_ms: i32,
    /// `consumer` for consumers.
    pub protocol_type: String,
    /// The assignors the member supports, in its order of preference, with their metadata.
    pub protocols: Vec<(String, Bytes)>,
    /// Whether the member must first get an id (JoinGroup v4 and above, KIP-394).
    pub require_known_member_id: bool,
}

/// The answer to a JoinGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinAnswer {
    /// The error, if any.
    pub error: Option<KafkaError>,
    /// The new generation.
    pub generation: i32,
    /// The protocol chosen for the group.
    pub protocol: Option<String>,
    /// The leader's member id.
    pub leader: String,
    /// The member's id.
    pub member_id: String,
    /// For the leader: every member (id, instance id, its metadata for the chosen protocol).
    pub members: Vec<(String, Option<String>, Bytes)>,
}

impl JoinAnswer {
    fn failed(error: KafkaError, member_id: &str) -> Self {
        JoinAnswer {
            error: Some(error),
            generation: -1,
            protocol: None,
            leader: String::new(),
            member_id: member_id.to_owned(),
            members: Vec::new(),
        }
    }
}

/// The answer to a SyncGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncAnswer {
    /// The error, if any.
    pub error: Option<KafkaError>,
    /// The member's assignment.
    pub assignment: Bytes,
}

impl SyncAnswer {
    fn failed(error: KafkaError) -> Self {
        SyncAnswer {
            error: Some(error),
            assignment: Bytes::new(),
        }
    }
}

/// A group as DescribeGroups shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    /// Its state.
    pub state: GroupState,
    /// `consumer` for consumers (empty before any member joined).
    pub protocol_type: String,
    /// The protocol chosen at the last rebalance (empty while none is).
    pub protocol: String,
    /// Every member.
    pub members: Vec<MemberDescription>,
}

/// A member as DescribeGroups shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    /// Its id.
    pub member_id: String,
    /// Its `group.instance.id`.
    pub instance_id: Option<String>,
    /// Its client's id.
    pub client_id: String,
    /// Where it connects from.
    pub client_host: String,
    /// Its metadata for the chosen protocol (empty while the group rebalances, as Kafka shows it).
    pub metadata: Bytes,
    /// Its assignment (empty until the group is stable).
    pub assignment: Bytes,
}

/// A group as it is stored: what a restarted node needs to carry on with the same generation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredGroup {
    /// `consumer` for consumers.
    pub protocol_type: Option<String>,
    /// The generation.
    pub generation: i32,
    /// The protocol chosen at the last rebalance.
    pub protocol: Option<String>,
    /// The leader's member id.
    pub leader: Option<String>,
    /// Every member (none in an emptied group).
    pub members: Vec<StoredMember>,
    /// When the group became Empty (its last member gone), for its offsets' retention (Kafka's
    /// `currentStateTimestamp`); absent while it has members, and in groups stored before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub empty_since_ms: Option<i64>,
}

/// A member as it is stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredMember {
    /// Its id.
    pub member_id: String,
    /// Its `group.instance.id`.
    pub instance_id: Option<String>,
    /// Its client's id.
    pub client_id: String,
    /// Where it connects from.
    pub client_host: String,
    /// Its session timeout.
    pub session_timeout_ms: i32,
    /// Its rebalance timeout.
    pub rebalance_timeout_ms: i32,
    /// Its protocols with their metadata.
    pub protocols: Vec<(String, Vec<u8>)>,
    /// Its assignment.
    pub assignment: Vec<u8>,
}

/// An answer now, or one to wait for.
#[derive(Debug)]
pub enum Pending<T> {
    /// Answered.
    Now(T),
    /// Answered when the rebalance gets there (a dropped sender means the group went away: retry).
    Wait(oneshot::Receiver<T>),
}

#[derive(Debug)]
struct Member {
    instance_id: Option<String>,
    client_id: String,
    client_host: String,
    session_timeout_ms: i32,
    rebalance_timeout_ms: i32,
    protocols: Vec<(String, Bytes)>,
    assignment: Bytes,
    /// When the member is removed unless it is heard from.
    expires_at_ms: i64,
    /// Joined in the current rebalance.
    joined: bool,
    join_waiter: Option<oneshot::Sender<JoinAnswer>>,
    sync_waiter: Option<oneshot::Sender<SyncAnswer>>,
}

#[derive(Debug)]
struct Group {
    state: GroupState,
    generation: i32,
    protocol_type: Option<String>,
    protocol: Option<String>,
    leader: Option<String>,
    members: BTreeMap<String, Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, with when they lapse.
    pending: BTreeMap<String, i64>,
    /// When the current rebalance completes with whoever has rejoined.
    rebalance_deadline_ms: i64,
    /// Counts the changes worth storing (a completed rebalance, an emptied group, a static member's new id).
    revision: u64,
    /// The revision last handed out by [`Membership::take_unstored`].
    stored_revision: u64,
    /// When the group became Empty after having members (`None`: it has members, or never had any).
    empty_since_ms: Option<i64>,
    /// The rebalance started from Empty and waits out the initial delay (completing it only at its deadline).
    initial_delay: Option<InitialDelay>,
    /// A new member joined during the initial delay of a group that never completed a rebalance.
    new_member_added: bool,
}

/// The initial delay a rebalance from Empty is in: the delay now running and what is left of the members'
/// rebalance timeout for further extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct InitialDelay {
    delay_ms: i64,
    remaining_ms: i64,
}

impl Group {
    fn new() -> Self {
        Group {
            state: GroupState::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            pending: BTreeMap::new(),
            rebalance_deadline_ms: 0,
            revision: 0,
            stored_revision: 0,
            empty_since_ms: None,
            initial_delay: None,
            new_member_added: false,
        }
    }

    /// The group restored from its stored form, its members' sessions starting at `now_ms`.
    fn restored(stored: StoredGroup, now_ms: i64) -> Self {
        let mut group = Group::new();
        group.protocol_type = stored.protocol_type;
        group.generation = stored.generation;
        group.protocol = stored.protocol;
        group.leader = stored.leader;
        for member in stored.members {
            group.members.insert(
                member.member_id,
                Member {
                    instance_id: member.instance_id,
                    client_id: member.client_id,
                    client_host: member.client_host,
                    session_timeout_ms: member.session_timeout_ms,
                    rebalance_timeout_ms: member.rebalance_timeout_ms,
                    protocols: member
                        .protocols
                        .into_iter()
                        .map(|(name, metadata)| (name, Bytes::from(metadata)))
                        .collect(),
                    assignment: Bytes::from(member.assignment),
                    expires_at_ms: now_ms.saturating_add(i64::from(member.session_timeout_ms)),
                    joined: true,
                    join_waiter: None,
                    sync_waiter: None,
                },
            );
        }
        group.state = if group.members.is_empty() {
            // A group stored before the time was recorded has none: its offsets count from their commit, as
            // Kafka's `currentStateTimestamp.getOrElse(commitTimestamp)`.
            group.empty_since_ms = stored.empty_since_ms;
            GroupState::Empty
        } else {
            GroupState::Stable
        };
        group
    }

    /// The topics its members subscribe to: `None` without members; `Some(None)` when they cannot be told (a
    /// protocol type other than `consumer`, a subscription that does not read).
    fn subscribed_topics(&self) -> Option<Option<std::collections::BTreeSet<String>>> {
        let group = self;
        if group.members.is_empty() {
            return None;
        }
        if group.protocol_type.as_deref() != Some("consumer") {
            return Some(None);
        }
        let mut topics = std::collections::BTreeSet::new();
        for member in group.members.values() {
            let metadata = match &group.protocol {
                Some(chosen) => member.protocols.iter().find(|(name, _)| name == chosen),
                None => member.protocols.first(),
            };
            match metadata.and_then(|(_, bytes)| subscription_topics(bytes)) {
                Some(subscribed) => topics.extend(subscribed),
                None => return Some(None),
            }
        }
        Some(Some(topics))
    }

    fn stored(&self) -> StoredGroup {
        StoredGroup {
            protocol_type: self.protocol_type.clone(),
            generation: self.generation,
            protocol: self.protocol.clone(),
            leader: self.leader.clone(),
            members: self
                .members
                .iter()
                .map(|(id, member)| StoredMember {
                    member_id: id.clone(),
                    instance_id: member.instance_id.clone(),
                    client_id: member.client_id.clone(),
                    client_host: member.client_host.clone(),
                    session_timeout_ms: member.session_timeout_ms,
                    rebalance_timeout_ms: member.rebalance_timeout_ms,
                    protocols: member
                        .protocols
                        .iter()
                        .map(|(name, metadata)| (name.clone(), metadata.to_vec()))
                        .collect(),
                    assignment: member.assignment.to_vec(),
                })
                .collect(),
            empty_since_ms: self.empty_since_ms.filter(|_| self.members.is_empty()),
        }
    }

    fn instance_owner(&self, instance_id: &str) -> Option<String> {
        self.members
            .iter()
            .find(|(_, member)| member.instance_id.as_deref() == Some(instance_id))
            .map(|(id, _)| id.clone())
    }

    /// Starts (or extends) a rebalance: every member must rejoin within its rebalance timeout. One that starts
    /// from Empty waits `initial_delay_ms` first (see the module docs).
    fn prepare_rebalance(&mut self, now_ms: i64, initial_delay_ms: i64) {
        let from_empty = self.state == GroupState::Empty;
        if self.state != GroupState::PreparingRebalance {
            for member in self.members.values_mut() {
                member.joined = false;
                // A follower waiting for its assignment learns it must rejoin.
                if let Some(waiter) = member.sync_waiter.take() {
                    let _ = waiter.send(SyncAnswer::failed(KafkaError::RebalanceInProgress));
                }
            }
            self.state = GroupState::PreparingRebalance;
        }
        let timeout = self
            .members
            .values()
            .map(|member| member.rebalance_timeout_ms)
            .max()
            .unwrap_or(0);
        self.new_member_added = false;
        if from_empty && initial_delay_ms > 0 {
            self.initial_delay = Some(InitialDelay {
                delay_ms: initial_delay_ms,
                remaining_ms: i64::from(timeout).saturating_sub(initial_delay_ms).max(0),
            });
            self.rebalance_deadline_ms = now_ms.saturating_add(initial_delay_ms);
        } else {
            self.initial_delay = None;
            self.rebalance_deadline_ms = now_ms.saturating_add(i64::from(timeout));
        }
    }

    /// The rebalance's deadline passed: an initial delay during which a new member joined is extended by
    /// another delay while the rebalance timeout allows (`true`: it was, the rebalance goes on waiting).
    fn extend_initial_delay(&mut self, now_ms: i64, initial_delay_ms: i64) -> bool {
        match self.initial_delay {
            Some(delay) if self.new_member_added && delay.remaining_ms > 0 => {
                self.new_member_added = false;
                let next = initial_delay_ms.min(delay.remaining_ms);
                self.initial_delay = Some(InitialDelay {
                    delay_ms: next,
                    remaining_ms: delay.remaining_ms.saturating_sub(delay.delay_ms).max(0),
                });
                self.rebalance_deadline_ms = now_ms.saturating_add(next);
                true
            }
            _ => false,
        }
    }

    /// Completes the rebalance if every member rejoined, or `force`d (its deadline passed): members that did not
    /// rejoin are removed, the generation moves on, a protocol is chosen and every joined member answered.
    fn try_complete_join(&mut self, now_ms: i64, force: bool) {
        if self.state != GroupState::PreparingRebalance {
            return;
        }
        // A rebalance from Empty completes at the end of its initial delay, not when everyone has joined.
        if !force && (self.initial_delay.is_some() || self.members.values().any(|member| !member.joined)) {
            return;
        }
        self.initial_delay = None;
        self.new_member_added = false;
        self.members.retain(|_, member| member.joined);
        self.generation = self.generation.wrapping_add(1).max(1);
        if self.members.is_empty() {
            // Kafka keeps an emptied group, with its protocol type, for its committed offsets.
            self.state = GroupState::Empty;
            self.empty_since_ms = Some(now_ms);
            self.protocol = None;
            self.leader = None;
            self.revision += 1;
            return;
        }
        self.protocol = self.choose_protocol();
        if !self
            .leader
            .as_ref()
            .is_some_and(|leader| self.members.contains_key(leader))
        {
            self.leader = self.members.keys().next().cloned();
        }
        self.state = GroupState::CompletingRebalance;
        let protocol = self.protocol.clone().unwrap_or_default();
        let leader = self.leader.clone().unwrap_or_default();
        let everyone: Vec<(String, Option<String>, Bytes)> = self
            .members
            .iter()
            .map(|(id, member)| {
                let metadata = member
                    .protocols
                    .iter()
                    .find(|(name, _)| *name == protocol)
                    .map(|(_, metadata)| metadata.clone())
                    .unwrap_or_default();
                (id.clone(), member.instance_id.clone(), metadata)
            })
            .collect();
        for (id, member) in &mut self.members {
            member.expires_at_ms = now_ms.saturating_add(i64::from(member.session_timeout_ms));
            member.assignment = Bytes::new();
            if let Some(waiter) = member.join_waiter.take() {
                let _ = waiter.send(JoinAnswer {
                    error: None,
                    generation: self.generation,
                    protocol: Some(protocol.clone()),
                    leader: leader.clone(),
                    member_id: id.clone(),
                    members: if *id == leader {
                        everyone.clone()
                    } else {
                        Vec::new()
                    },
                });
            }
        }
    }

    /// The protocol every member supports that most members prefer (each votes for its first such protocol).
    fn choose_protocol(&self) -> Option<String> {
        let mut candidates: Vec<&String> = self
            .members
            .values()
            .next()?
            .protocols
            .iter()
            .map(|(name, _)| name)
            .collect();
        candidates.retain(|name| {
            self.members
                .values()
                .all(|member| member.protocols.iter().any(|(other, _)| other == *name))
        });
        let mut votes: BTreeMap<&String, usize> = BTreeMap::new();
        for member in self.members.values() {
            if let Some((name, _)) = member
                .protocols
                .iter()
                .find(|(name, _)| candidates.contains(&name))
            {
                *votes.entry(name).or_default() += 1;
            }
        }
        candidates
            .iter()
            .max_by_key(|name| (votes.get(*name).copied().unwrap_or(0), std::cmp::Reverse(**name)))
            .map(|name| (*name).clone())
    }

    /// Whether `protocols` share a protocol with every current member (always, in an empty group).
    fn supports(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.members.is_empty() {
            return true;
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols.iter().any(|(name, _)| {
                self.members
                    .values()
                    .all(|member| member.protocols.iter().any(|(other, _)| other == name))
            })
    }

    fn remove_member(&mut self, member_id: &str, now_ms: i64) {
        if let Some(mut member) = self.members.remove(member_id) {
            if let Some(waiter) = member.join_waiter.take() {
                let _ = waiter.send(JoinAnswer::failed(KafkaError::UnknownMemberId, member_id));
            }
            if let Some(waiter) = member.sync_waiter.take() {
                let _ = waiter.send(SyncAnswer::failed(KafkaError::UnknownMemberId));
            }
        }
        match self.state {
            // A group with members is not Empty: no initial delay applies.
            GroupState::Stable | GroupState::CompletingRebalance => self.prepare_rebalance(now_ms, 0),
            GroupState::PreparingRebalance => {}
            GroupState::Empty => return,
        }
        self.try_complete_join(now_ms, false);
    }
}

/// Every consumer group of a node; see the module docs.
#[derive(Debug, Default)]
pub struct Membership {
    groups: Mutex<BTreeMap<String, Group>>,
    next_member: std::sync::atomic::AtomicU64,
    /// Set by [`Membership::close`]: nothing waits any more.
    closed: std::sync::atomic::AtomicBool,
    /// `group.initial.rebalance.delay.ms` (0: none).
    initial_rebalance_delay_ms: i64,
}

impl Membership {
    fn groups(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Group>> {
        // A panic while the lock was held leaves consistent maps behind (every change is a single insert or
        // remove); the state is still usable.
        self.groups
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A member id no member of `group` has, known or pending: the client id, the caller's time and a counter
    /// (Kafka appends a random UUID; the time keeps ids given after a restart apart from the ones restored, and the
    /// simulator's runs deterministic; should a clock step back onto a restored id, the counter moves on).
    fn new_member_id(&self, client_id: &str, now_ms: i64, group: &Group) -> String {
        loop {
            let n = self
                .next_member
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let id = format!("{client_id}-{now_ms:x}-{n}");
            if !group.members.contains_key(&id) && !group.pending.contains_key(&id) {
                return id;
            }
        }
    }

    /// JoinGroup.
    pub fn join(&self, request: JoinRequest, now_ms: i64) -> Pending<JoinAnswer> {
        let fail = |error| Pending::Now(JoinAnswer::failed(error, &request.member_id));
        if request.group.is_empty() {
            return fail(KafkaError::InvalidGroupId);
        }
        if self.is_closed() {
            return fail(KafkaError::RebalanceInProgress);
        }
        if !(MIN_SESSION_TIMEOUT_MS..=MAX_SESSION_TIMEOUT_MS).contains(&request.session_timeout_ms) {
            return fail(KafkaError::InvalidSessionTimeout);
        }
        if request.protocols.is_empty()
            || request.protocol_type.is_empty()
            || request
                .protocols
                .iter()
                .any(|(_, metadata)| metadata.len() > MAX_MEMBER_BYTES)
        {
            return fail(KafkaError::InconsistentGroupProtocol);
        }
        let mut groups = self.groups();
        let group = groups.entry(request.group.clone()).or_insert_with(Group::new);
        if !group.supports(&request.protocol_type, &request.protocols) {
            return fail(KafkaError::InconsistentGroupProtocol);
        }
        let mut member_id = request.member_id.clone();
        if member_id.is_empty() {
            member_id = match request
                .instance_id
                .as_deref()
                .and_then(|instance| group.instance_owner(instance))
            {
                // A static member back under a new id: the old id is fenced, its place kept.
                Some(old) => {
                    let new = self.new_member_id(&request.client_id, now_ms, group);
                    let leader_before = group.leader.clone();
                    if let Some(mut member) = group.members.remove(&old) {
                        if group.leader.as_deref() == Some(old.as_str()) {
                            group.leader = Some(new.clone());
                        }
                        // The old id's waiting join or sync is fenced, as Kafka's `replaceStaticMember` answers it.
                        if let Some(waiter) = member.join_waiter.take() {
                            let _ = waiter.send(JoinAnswer::failed(KafkaError::FencedInstanceId, &old));
                        }
                        if let Some(waiter) = member.sync_waiter.take() {
                            let _ = waiter.send(SyncAnswer::failed(KafkaError::FencedInstanceId));
                        }
                        group.members.insert(new.clone(), member);
                    }
                    group.revision += 1;
                    // Kafka's rule (KIP-345): in a Stable group, a return that leaves the group's protocol as it
                    // is rebalances nothing — the member gets the current generation, and the leader id as it was
                    // before the return, so that a returning leader does not assign (a Stable group would not pass
                    // its assignment on).
                    if group.state == GroupState::Stable {
                        let mut protocols_before = None;
                        if let Some(member) = group.members.get_mut(&new) {
                            protocols_before = Some(std::mem::replace(
                                &mut member.protocols,
                                request.protocols.clone(),
                            ));
                            member.client_id = request.client_id.clone();
                            member.client_host = request.client_host.clone();
                            member.session_timeout_ms = request.session_timeout_ms;
                            member.rebalance_timeout_ms =
                                request.rebalance_timeout_ms.max(request.session_timeout_ms);
                            member.expires_at_ms =
                                now_ms.saturating_add(i64::from(request.session_timeout_ms));
                        }
                        if group.choose_protocol() == group.protocol {
                            return Pending::Now(JoinAnswer {
                                error: None,
                                generation: group.generation,
                                protocol: group.protocol.clone(),
                                leader: leader_before.unwrap_or_default(),
                                member_id: new,
                                members: Vec::new(),
                            });
                        }
                        // The group's protocol would change: the member's old protocols go back, so that the join
                        // below sees the change and rebalances.
                        if let (Some(member), Some(before)) = (group.members.get_mut(&new), protocols_before)
                        {
                            member.protocols = before;
                        }
                    }
                    new
                }
                None if group.members.len() + group.pending.len() >= MAX_MEMBERS => {
                    return fail(KafkaError::GroupMaxSizeReached);
                }
                None if request.require_known_member_id && request.instance_id.is_none() => {
                    let new = self.new_member_id(&request.client_id, now_ms, group);
                    group.pending.insert(
                        new.clone(),
                        now_ms.saturating_add(i64::from(request.session_timeout_ms)),
                    );
                    return Pending::Now(JoinAnswer::failed(KafkaError::MemberIdRequired, &new));
                }
                None => self.new_member_id(&request.client_id, now_ms, group),
            };
        } else if let Some(instance) = request.instance_id.as_deref() {
            if group
                .instance_owner(instance)
                .is_some_and(|owner| owner != member_id)
            {
                return fail(KafkaError::FencedInstanceId);
            }
        }
        let known = group.members.contains_key(&member_id);
        let was_pending = group.pending.remove(&member_id).is_some();
        if !known && !was_pending && !request.member_id.is_empty() {
            return fail(KafkaError::UnknownMemberId);
        }
        if !known && group.state == GroupState::PreparingRebalance && group.generation == 0 {
            // Kafka's rule: only a group's first rebalance is held open for late members.
            group.new_member_added = true;
        }
        let changed = group
            .members
            .get(&member_id)
            .is_none_or(|member| member.protocols != request.protocols);
        if group.state == GroupState::Stable
            && !changed
            && group.leader.as_deref() != Some(member_id.as_str())
        {
            // A follower rejoining with what it had: the current generation, no rebalance (Kafka's rule).
            let member = group.members.get_mut(&member_id);
            if let Some(member) = member {
                member.expires_at_ms = now_ms.saturating_add(i64::from(member.session_timeout_ms));
            }
            return Pending::Now(JoinAnswer {
                error: None,
                generation: group.generation,
                protocol: group.protocol.clone(),
                leader: group.leader.clone().unwrap_or_default(),
                member_id,
                members: Vec::new(),
            });
        }
        let (sender, receiver) = oneshot::channel();
        let member = group.members.entry(member_id.clone()).or_insert_with(|| Member {
            instance_id: request.instance_id.clone(),
            client_id: request.client_id.clone(),
            client_host: request.client_host.clone(),
            session_timeout_ms: request.session_timeout_ms,
            rebalance_timeout_ms: request.rebalance_timeout_ms,
            protocols: Vec::new(),
            assignment: Bytes::new(),
            expires_at_ms: 0,
            joined: false,
            join_waiter: None,
            sync_waiter: None,
        });
        member.client_id = request.client_id;
        member.client_host = request.client_host;
        member.session_timeout_ms = request.session_timeout_ms;
        member.rebalance_timeout_ms = request.rebalance_timeout_ms.max(request.session_timeout_ms);
        member.protocols = request.protocols;
        // While it waits for the rebalance, the member is alive: its session restarts when the join completes.
        member.expires_at_ms = i64::MAX;
        if let Some(old) = member.join_waiter.replace(sender) {
            let _ = old.send(JoinAnswer::failed(KafkaError::RebalanceInProgress, &member_id));
        }
        group.protocol_type = Some(request.protocol_type);
        if group.state != GroupState::PreparingRebalance {
            group.prepare_rebalance(now_ms, self.initial_rebalance_delay_ms);
        }
        if let Some(member) = group.members.get_mut(&member_id) {
            member.joined = true;
        }
        group.try_complete_join(now_ms, false);
        Pending::Wait(receiver)
    }

    /// SyncGroup: the leader's `assignments` (member id → assignment) complete the rebalance.
    pub fn sync(
        &self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        assignments: Vec<(String, Bytes)>,
        now_ms: i64,
    ) -> Pending<SyncAnswer> {
        let fail = |error| Pending::Now(SyncAnswer::failed(error));
        if self.is_closed() {
            return fail(KafkaError::RebalanceInProgress);
        }
        let mut groups = self.groups();
        let Some(group) = groups.get_mut(group_id) else {
            return fail(KafkaError::UnknownMemberId);
        };
        if !group.members.contains_key(member_id) {
            return fail(KafkaError::UnknownMemberId);
        }
        if generation != group.generation {
            return fail(KafkaError::IllegalGeneration);
        }
        match group.state {
            GroupState::Empty => fail(KafkaError::UnknownMemberId),
            GroupState::PreparingRebalance => fail(KafkaError::RebalanceInProgress),
            GroupState::Stable => {
                let assignment = group
                    .members
                    .get(member_id)
                    .map(|member| member.assignment.clone())
                    .unwrap_or_default();
                Pending::Now(SyncAnswer {
                    error: None,
                    assignment,
                })
            }
            GroupState::CompletingRebalance => {
                let (sender, receiver) = oneshot::channel();
                if let Some(member) = group.members.get_mut(member_id) {
                    member.sync_waiter = Some(sender);
                    member.expires_at_ms = now_ms.saturating_add(i64::from(member.session_timeout_ms));
                }
                if group.leader.as_deref() == Some(member_id) {
                    if assignments
                        .iter()
                        .any(|(_, assignment)| assignment.len() > MAX_MEMBER_BYTES)
                    {
                        // Kafka answers an assignment too large to store so; the leader may sync again.
                        if let Some(member) = group.members.get_mut(member_id) {
                            member.sync_waiter = None;
                        }
                        return fail(KafkaError::UnknownServerError);
                    }
                    let mut assignments: BTreeMap<String, Bytes> = assignments.into_iter().collect();
                    for (id, member) in &mut group.members {
                        member.assignment = assignments.remove(id).unwrap_or_default();
                        if let Some(waiter) = member.sync_waiter.take() {
                            let _ = waiter.send(SyncAnswer {
                                error: None,
                                assignment: member.assignment.clone(),
                            });
                        }
                    }
                    group.state = GroupState::Stable;
                    group.revision += 1;
                }
                Pending::Wait(receiver)
            }
        }
    }

    /// Whether `group_id` has members on this node.
    pub fn has_members(&self, group_id: &str) -> bool {
        self.groups()
            .get(group_id)
            .is_some_and(|group| !group.members.is_empty())
    }

    /// A group's protocol type and chosen protocol, `None` for a group this node does not hold.
    pub fn protocol_of(&self, group_id: &str) -> Option<(Option<String>, Option<String>)> {
        self.groups()
            .get(group_id)
            .map(|group| (group.protocol_type.clone(), group.protocol.clone()))
    }

    /// Heartbeat.
    pub fn heartbeat(
        &self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        now_ms: i64,
    ) -> Option<KafkaError> {
        let mut groups = self.groups();
        let Some(group) = groups.get_mut(group_id) else {
            return Some(KafkaError::UnknownMemberId);
        };
        let state = group.state;
        let current = group.generation;
        let Some(member) = group.members.get_mut(member_id) else {
            return Some(KafkaError::UnknownMemberId);
        };
        if generation != current {
            return Some(KafkaError::IllegalGeneration);
        }
        if member.expires_at_ms != i64::MAX {
            member.expires_at_ms = now_ms.saturating_add(i64::from(member.session_timeout_ms));
        }
        (state == GroupState::PreparingRebalance).then_some(KafkaError::RebalanceInProgress)
    }

    /// LeaveGroup of one member (by id, or by instance id for a static member); the error for it, if any.
    pub fn leave(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        now_ms: i64,
    ) -> Option<KafkaError> {
        let mut groups = self.groups();
        let Some(group) = groups.get_mut(group_id) else {
            return Some(KafkaError::UnknownMemberId);
        };
        let id = match instance_id {
            Some(instance) => match group.instance_owner(instance) {
                Some(owner) if member_id.is_empty() || owner == member_id => owner,
                Some(_) => return Some(KafkaError::FencedInstanceId),
                None => return Some(KafkaError::UnknownMemberId),
            },
            None if group.members.contains_key(member_id) => member_id.to_owned(),
            None => return Some(KafkaError::UnknownMemberId),
        };
        group.remove_member(&id, now_ms);
        None
    }

    /// Whether an offset commit from `member_id` at `generation` may write the group's offsets: a group without
    /// members takes commits from anyone (consumers that `assign()` their partitions commit with generation −1);
    /// otherwise the member must be current, and the group not waiting for its leader's assignment (Kafka's rule:
    /// while the group prepares a rebalance, members commit what they processed before they rejoin).
    pub fn check_commit(&self, group_id: &str, generation: i32, member_id: &str) -> Option<KafkaError> {
        let groups = self.groups();
        let group = groups.get(group_id)?;
        if group.members.is_empty() {
            return None;
        }
        if generation < 0 && member_id.is_empty() {
            // Kafka refuses a simple commit to a group with live members.
            return Some(KafkaError::UnknownMemberId);
        }
        if !group.members.contains_key(member_id) {
            return Some(KafkaError::UnknownMemberId);
        }
        if generation != group.generation {
            return Some(KafkaError::IllegalGeneration);
        }
        (group.state == GroupState::CompletingRebalance).then_some(KafkaError::RebalanceInProgress)
    }

    /// Whether a transactional offset commit (TxnOffsetCommit v3+, KIP-447) may stage the group's offsets: a
    /// member id or instance id it names must be the group's, and a generation it names (≥ 0) the current one.
    /// Unlike a plain commit, a rebalance does not refuse it (Kafka's rule).
    pub fn check_txn_commit(
        &self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Option<KafkaError> {
        let groups = self.groups();
        let Some(group) = groups.get(group_id) else {
            return (!member_id.is_empty()).then_some(KafkaError::UnknownMemberId);
        };
        if let Some(instance) = instance_id {
            if group
                .instance_owner(instance)
                .is_some_and(|owner| owner != member_id)
            {
                return Some(KafkaError::FencedInstanceId);
            }
        }
        if !member_id.is_empty() && !group.members.contains_key(member_id) {
            return Some(KafkaError::UnknownMemberId);
        }
        (generation >= 0 && generation != group.generation).then_some(KafkaError::IllegalGeneration)
    }

    /// Removes members whose session expired and completes rebalances whose deadline passed; drops empty groups.
    pub fn tick(&self, now_ms: i64) {
        let mut groups = self.groups();
        for group in groups.values_mut() {
            group.pending.retain(|_, lapses| *lapses > now_ms);
            let expired: Vec<String> = group
                .members
                .iter()
                .filter(|(_, member)| member.expires_at_ms <= now_ms)
                .map(|(id, _)| id.clone())
                .collect();
            for id in expired {
                group.remove_member(&id, now_ms);
            }
            if group.state == GroupState::PreparingRebalance
                && group.rebalance_deadline_ms <= now_ms
                && !group.extend_initial_delay(now_ms, self.initial_rebalance_delay_ms)
            {
                group.try_complete_join(now_ms, true);
            }
        }
        // A group that never had a member (only ids handed out, now lapsed) goes; an emptied one stays, as
        // Kafka keeps it (DescribeGroups and ListGroups show it Empty).
        groups.retain(|_, group| {
            group.state != GroupState::Empty || !group.pending.is_empty() || group.protocol_type.is_some()
        });
    }

    /// Forgets every group (the node is shutting down): every JoinGroup or SyncGroup still waiting is answered
    /// at once (UNKNOWN_MEMBER_ID for a join, REBALANCE_IN_PROGRESS for a sync: the client joins again), and
    /// later ones are answered REBALANCE_IN_PROGRESS without waiting.
    pub fn close(&self) {
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        self.groups().clear();
    }

    /// No group yet, a rebalance from Empty waiting `initial_rebalance_delay_ms` (Kafka's
    /// `group.initial.rebalance.delay.ms`; 0: none).
    pub fn new(initial_rebalance_delay_ms: i64) -> Self {
        Membership {
            initial_rebalance_delay_ms: initial_rebalance_delay_ms.max(0),
            ..Membership::default()
        }
    }

    /// The membership of a restarted node: every stored group back, its members' sessions starting at `now_ms`.
    pub fn restore(
        stored: impl IntoIterator<Item = (String, StoredGroup)>,
        now_ms: i64,
        initial_rebalance_delay_ms: i64,
    ) -> Self {
        let membership = Membership::new(initial_rebalance_delay_ms);
        membership.groups().extend(
            stored
                .into_iter()
                .map(|(id, group)| (id, Group::restored(group, now_ms))),
        );
        membership
    }

    /// The groups whose stored form changed since the last call, in a state worth storing (stable or empty; a
    /// rebalance in progress is stored when it completes). The caller writes them durably.
    pub fn take_unstored(&self) -> Vec<(String, StoredGroup)> {
        if self.is_closed() {
            return Vec::new();
        }
        let mut groups = self.groups();
        groups
            .iter_mut()
            .filter(|(_, group)| {
                group.revision != group.stored_revision
                    && matches!(group.state, GroupState::Stable | GroupState::Empty)
            })
            .map(|(id, group)| {
                group.stored_revision = group.revision;
                (id.clone(), group.stored())
            })
            .collect()
    }

    fn is_closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// A group's description; `None` for a group this node does not hold.
    pub fn describe_group(&self, group_id: &str) -> Option<GroupDescription> {
        let groups = self.groups();
        let group = groups.get(group_id)?;
        let chosen = matches!(group.state, GroupState::Stable | GroupState::CompletingRebalance);
        let protocol = group.protocol.clone().unwrap_or_default();
        Some(GroupDescription {
            state: group.state,
            protocol_type: group.protocol_type.clone().unwrap_or_default(),
            protocol: if chosen { protocol.clone() } else { String::new() },
            members: group
                .members
                .iter()
                .map(|(id, member)| MemberDescription {
                    member_id: id.clone(),
                    instance_id: member.instance_id.clone(),
                    client_id: member.client_id.clone(),
                    client_host: member.client_host.clone(),
                    metadata: if chosen {
                        member
                            .protocols
                            .iter()
                            .find(|(name, _)| *name == protocol)
                            .map(|(_, metadata)| metadata.clone())
                            .unwrap_or_default()
                    } else {
                        Bytes::new()
                    },
                    assignment: if group.state == GroupState::Stable {
                        member.assignment.clone()
                    } else {
                        Bytes::new()
                    },
                })
                .collect(),
        })
    }

    /// The topics a group's members subscribe to, for OffsetDelete: `None` for a group without members here;
    /// `Some(None)` when they cannot be told (a protocol type other than `consumer`, or a member's subscription that
    /// does not read), which OffsetDelete takes as "subscribed to everything".
    pub fn subscribed_topics(&self, group_id: &str) -> Option<Option<std::collections::BTreeSet<String>>> {
        let groups = self.groups();
        groups.get(group_id).and_then(Group::subscribed_topics)
    }

    /// How a group's committed offsets expire (`offsets.retention.minutes`), as Kafka's coordinator decides it
    /// (one look at the group).
    pub fn offsets_expiry(&self, group_id: &str) -> OffsetExpiry {
        let groups = self.groups();
        let Some(group) = groups.get(group_id) else {
            return OffsetExpiry::Standalone;
        };
        if group.members.is_empty() && group.state == GroupState::Empty {
            return match group.empty_since_ms {
                Some(since) => OffsetExpiry::EmptySince(since),
                None => OffsetExpiry::Standalone,
            };
        }
        match group.subscribed_topics() {
            Some(Some(topics)) if group.state == GroupState::Stable => OffsetExpiry::Unsubscribed(topics),
            _ => OffsetExpiry::Keep,
        }
    }

    /// Every group that has or had members: (id, protocol type, state).
    pub fn list(&self) -> Vec<(String, String, GroupState)> {
        self.groups()
            .iter()
            .filter(|(_, group)| group.protocol_type.is_some())
            .map(|(id, group)| {
                (
                    id.clone(),
                    group.protocol_type.clone().unwrap_or_default(),
                    group.state,
                )
            })
            .collect()
    }

    /// DeleteGroups' membership half: `Ok(true)` when an empty group was forgotten, `Ok(false)` when this node
    /// holds no such group, NON_EMPTY_GROUP while it has members.
    pub fn delete(&self, group_id: &str) -> Result<bool, KafkaError> {
        let mut groups = self.groups();
        match groups.get(group_id) {
            None => Ok(false),
            Some(group) if !group.members.is_empty() => Err(KafkaError::NonEmptyGroup),
            Some(_) => {
                groups.remove(group_id);
                Ok(true)
            }
        }
    }

    /// Forgets `group_id` if it is Empty with nobody joining (no member, no member id handed out): what
    /// offsets expiry may remove. Whether it did.
    pub fn delete_idle(&self, group_id: &str) -> bool {
        let mut groups = self.groups();
        let idle = groups.get(group_id).is_some_and(|group| {
            group.state == GroupState::Empty && group.members.is_empty() && group.pending.is_empty()
        });
        if idle {
            groups.remove(group_id);
        }
        idle
    }

    /// How many groups the node holds (members, or member ids handed out and not yet lapsed).
    pub fn group_count(&self) -> usize {
        self.groups().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn join(group: &str, member_id: &str, protocols: &[&str]) -> JoinRequest {
        JoinRequest {
            group: group.to_owned(),
            member_id: member_id.to_owned(),
            instance_id: None,
            client_id: "client".to_owned(),
            client_host: "/127.0.0.1".to_owned(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 10_000,
            protocol_type: "consumer".to_owned(),
            protocols: protocols
                .iter()
                .map(|name| ((*name).to_owned(), Bytes::from(name.to_string())))
                .collect(),
            require_known_member_id: true,
        }
    }

    fn now<T: std::fmt::Debug>(pending: Pending<T>) -> T {
        match pending {
            Pending::Now(answer) => answer,
            Pending::Wait(mut receiver) => receiver.try_recv().expect("answered"),
        }
    }

    /// A new member gets an id, joins and, alone, leads generation 1.
    fn first_member(groups: &Membership) -> String {
        let id = now(groups.join(join("g", "", &["range"]), 0)).member_id;
        let answer = now(groups.join(join("g", &id, &["range"]), 0));
        assert_eq!((answer.error, answer.generation), (None, 1));
        assert_eq!(answer.leader, id);
        id
    }

    #[test]
    fn a_new_member_first_gets_its_id_with_member_id_required() {
        let groups = Membership::default();
        let answer = now(groups.join(join("g", "", &["range"]), 0));
        assert_eq!(answer.error, Some(KafkaError::MemberIdRequired));
        assert!(!answer.member_id.is_empty());
        let unknown = now(groups.join(join("g", "made-up", &["range"]), 0));
        assert_eq!(unknown.error, Some(KafkaError::UnknownMemberId));
    }

    #[test]
    fn a_second_member_rebalances_the_group_and_the_leader_assigns_both() {
        let groups = Membership::default();
        let first = first_member(&groups);
        let synced = now(groups.sync("g", 1, &first, vec![(first.clone(), Bytes::from("p0,p1"))], 0));
        assert_eq!(synced.assignment, Bytes::from("p0,p1"));

        let second = now(groups.join(join("g", "", &["range"]), 1)).member_id;
        let Pending::Wait(mut second_join) = groups.join(join("g", &second, &["range"]), 1) else {
            panic!("the second member waits for the first to rejoin");
        };
        assert_eq!(
            groups.heartbeat("g", 1, &first, 2),
            Some(KafkaError::RebalanceInProgress)
        );
        let first_join = now(groups.join(join("g", &first, &["range"]), 3));
        let second_answer = second_join.try_recv().unwrap();
        assert_eq!((first_join.generation, second_answer.generation), (2, 2));
        assert_eq!(first_join.members.len(), 2, "the leader sees every member");
        assert!(second_answer.members.is_empty());
        let Pending::Wait(mut follower) = groups.sync("g", 2, &second, Vec::new(), 4) else {
            panic!("a follower waits for the leader's assignment");
        };
        let assignments = vec![
            (first.clone(), Bytes::from("p0")),
            (second.clone(), Bytes::from("p1")),
        ];
        assert_eq!(
            now(groups.sync("g", 2, &first, assignments, 5)).assignment,
            Bytes::from("p0")
        );
        assert_eq!(follower.try_recv().unwrap().assignment, Bytes::from("p1"));
        assert_eq!(groups.heartbeat("g", 2, &second, 6), None);
        assert_eq!(
            groups.heartbeat("g", 1, &second, 6),
            Some(KafkaError::IllegalGeneration)
        );
        assert_eq!(groups.check_commit("g", 2, &second), None);
        assert_eq!(
            groups.check_commit("g", 1, &second),
            Some(KafkaError::IllegalGeneration)
        );
        assert_eq!(
            groups.check_commit("g", -1, ""),
            Some(KafkaError::UnknownMemberId)
        );
    }

    /// A member id handed out, then its join parked: the receiver of its answer.
    fn parked_join(groups: &Membership, now_ms: i64) -> (String, tokio::sync::oneshot::Receiver<JoinAnswer>) {
        let id = now(groups.join(join("g", "", &["range"]), now_ms)).member_id;
        match groups.join(join("g", &id, &["range"]), now_ms) {
            Pending::Wait(receiver) => (id, receiver),
            Pending::Now(answer) => panic!("the join was answered at once: {answer:?}"),
        }
    }

    #[test]
    fn a_groups_first_rebalance_waits_the_initial_delay_extended_while_new_members_arrive() {
        let groups = Membership::new(3_000);
        let (first, mut first_answer) = parked_join(&groups, 0);
        groups.tick(2_999);
        assert!(
            first_answer.try_recv().is_err(),
            "alone, the first member still waits out the delay"
        );
        let (_second, mut second_answer) = parked_join(&groups, 1_000);
        // Every member has joined, yet the rebalance from Empty does not complete before the delay.
        groups.tick(3_000);
        assert!(
            first_answer.try_recv().is_err(),
            "a new member during the delay extends it"
        );
        groups.tick(5_999);
        assert!(second_answer.try_recv().is_err());
        groups.tick(6_000);
        let (leader, follower) = (
            first_answer.try_recv().unwrap(),
            second_answer.try_recv().unwrap(),
        );
        assert_eq!(
            (leader.generation, follower.generation),
            (1, 1),
            "one generation for both"
        );
        assert_eq!(leader.leader, first);
        assert_eq!(leader.members.len(), 2);
    }

    #[test]
    fn the_initial_delay_stops_growing_at_the_rebalance_timeout() {
        let groups = Membership::new(3_000);
        let (_, mut first_answer) = parked_join(&groups, 0);
        // A new member every 2.5 s, the timers checked every 100 ms: the delay ends at 3 s, is extended to 6 s and
        // 9 s, then by the 1 s left of the 10 s rebalance timeout — and not again, whoever joined meanwhile.
        let mut completed_at = None;
        for at in (100..=20_000).step_by(100) {
            groups.tick(at);
            if first_answer.try_recv().is_ok() {
                completed_at = Some(at);
                break;
            }
            if at % 2_500 == 0 {
                let _ = parked_join(&groups, at);
            }
        }
        assert_eq!(completed_at, Some(10_000));
        assert_eq!(
            groups.describe_group("g").map(|group| group.state),
            Some(GroupState::CompletingRebalance)
        );
    }

    #[test]
    fn an_emptied_groups_rebalance_waits_one_delay_and_a_zero_delay_none() {
        let groups = Membership::new(3_000);
        let (first, mut answer) = parked_join(&groups, 0);
        groups.tick(3_000);
        assert_eq!(answer.try_recv().unwrap().generation, 1);
        assert_eq!(groups.leave("g", &first, None, 3_001), None);
        // Emptied (generation 2, as Kafka moves it on): the next rebalance waits one delay, and a member arriving meanwhile does not
        // extend it (Kafka extends only a group's first rebalance).
        let (_, mut again) = parked_join(&groups, 10_000);
        let (_, mut other) = parked_join(&groups, 11_000);
        groups.tick(12_999);
        assert!(again.try_recv().is_err());
        groups.tick(13_000);
        assert_eq!(
            (
                again.try_recv().unwrap().generation,
                other.try_recv().unwrap().generation
            ),
            (3, 3)
        );

        let at_once = Membership::new(0);
        let id = now(at_once.join(join("g", "", &["range"]), 0)).member_id;
        assert_eq!(now(at_once.join(join("g", &id, &["range"]), 0)).generation, 1);
    }

    #[test]
    fn a_member_whose_session_expires_is_removed_and_the_rest_rebalance() {
        let groups = Membership::default();
        let first = first_member(&groups);
        now(groups.sync("g", 1, &first, Vec::new(), 0));
        let second = now(groups.join(join("g", "", &["range"]), 1)).member_id;
        let Pending::Wait(mut waiting) = groups.join(join("g", &second, &["range"]), 1) else {
            panic!("waits");
        };
        // The first member never rejoins: at the rebalance deadline it is dropped and the second leads alone.
        groups.tick(10_001);
        let answer = waiting.try_recv().unwrap();
        assert_eq!((answer.generation, answer.leader.as_str()), (2, second.as_str()));
        now(groups.sync("g", 2, &second, Vec::new(), 10_002));
        // Then the second goes silent past its session timeout: the group empties (and stays, as Kafka keeps it).
        groups.tick(10_002 + 10_000);
        assert_eq!(
            groups.describe_group("g").map(|group| group.state),
            Some(GroupState::Empty)
        );
        assert_eq!(
            groups.check_commit("g", -1, ""),
            None,
            "an empty group takes simple commits"
        );
    }

    /// `offsets.retention.minutes` asks the group how its offsets expire: kept while it has members whose
    /// subscriptions cannot be read, counted from the moment it emptied once Empty (a moment stored with it, so a
    /// restart does not restart the count), by commit time for a group not known here.
    #[test]
    fn a_groups_offsets_expire_from_when_it_emptied_and_not_while_it_has_members() {
        let groups = Membership::default();
        assert_eq!(groups.offsets_expiry("standalone"), OffsetExpiry::Standalone);
        let first = first_member(&groups);
        now(groups.sync("g", 1, &first, Vec::new(), 0));
        assert_eq!(groups.offsets_expiry("g"), OffsetExpiry::Keep);
        assert_eq!(groups.leave("g", &first, None, 7_000), None);
        assert_eq!(groups.offsets_expiry("g"), OffsetExpiry::EmptySince(7_000));
        let restored = Membership::restore(groups.take_unstored(), 50_000, 0);
        assert_eq!(restored.offsets_expiry("g"), OffsetExpiry::EmptySince(7_000));
    }

    #[test]
    fn a_leave_rebalances_the_others_and_a_stale_generation_cannot_sync() {
        let groups = Membership::default();
        let first = first_member(&groups);
        now(groups.sync("g", 1, &first, Vec::new(), 0));
        assert_eq!(groups.leave("g", &first, None, 1), None);
        assert_eq!(
            groups.describe_group("g").map(|group| group.state),
            Some(GroupState::Empty)
        );
        assert_eq!(
            groups.leave("g", &first, None, 1),
            Some(KafkaError::UnknownMemberId)
        );
        let again = now(groups.sync("g", 1, &first, Vec::new(), 2));
        assert_eq!(again.error, Some(KafkaError::UnknownMemberId));
    }

    #[test]
    fn members_without_a_common_protocol_are_refused() {
        let groups = Membership::default();
        first_member(&groups);
        let id = now(groups.join(join("g", "", &["roundrobin"]), 1));
        assert_eq!(id.error, Some(KafkaError::InconsistentGroupProtocol));
        let mut bad = join("g", "", &["range"]);
        bad.session_timeout_ms = 10;
        assert_eq!(
            now(groups.join(bad, 1)).error,
            Some(KafkaError::InvalidSessionTimeout)
        );
    }

    #[test]
    fn a_static_member_that_comes_back_takes_its_place_and_fences_the_old_id() {
        let groups = Membership::default();
        let mut request = join("g", "", &["range"]);
        request.instance_id = Some("instance-1".to_owned());
        let old = now(groups.join(request.clone(), 0));
        assert_eq!(old.generation, 1);
        let assigned = vec![(old.member_id.clone(), Bytes::from_static(b"p0"))];
        now(groups.sync("g", 1, &old.member_id, assigned, 0));
        let back = now(groups.join(request, 1));
        assert_ne!(back.member_id, old.member_id);
        assert_eq!(
            (back.generation, back.leader.as_str(), back.members.len()),
            (1, old.member_id.as_str(), 0),
            "no rebalance; the leader id as it was, so the returning leader does not assign"
        );
        assert_eq!(
            now(groups.sync("g", 1, &back.member_id, Vec::new(), 2)).assignment,
            Bytes::from_static(b"p0"),
            "its assignment as it was"
        );
        assert_eq!(
            groups.heartbeat("g", back.generation, &old.member_id, 2),
            Some(KafkaError::UnknownMemberId)
        );
        let mut stale = join("g", &old.member_id, &["range"]);
        stale.instance_id = Some("instance-1".to_owned());
        assert_eq!(
            now(groups.join(stale, 3)).error,
            Some(KafkaError::FencedInstanceId)
        );
    }

    #[test]
    fn a_static_follower_back_with_protocols_that_change_the_groups_choice_rebalances() {
        let groups = Membership::default();
        // a leads with [range, roundrobin]; b, static, joins with [roundrobin]: the group settles on roundrobin.
        let a = now(groups.join(join("g", "", &["range", "roundrobin"]), 0)).member_id;
        now(groups.join(join("g", &a, &["range", "roundrobin"]), 0));
        let mut b = join("g", "", &["roundrobin"]);
        b.instance_id = Some("instance-b".to_owned());
        let parked = groups.join(b.clone(), 0);
        let rejoin = now(groups.join(join("g", &a, &["range", "roundrobin"]), 0));
        let Pending::Wait(mut parked) = parked else {
            panic!("b waits for the rebalance")
        };
        let b_id = parked.try_recv().expect("answered").member_id;
        assert_eq!(rejoin.protocol.as_deref(), Some("roundrobin"));
        now(groups.sync("g", rejoin.generation, &a, Vec::new(), 0));
        // b comes back, offering range too: range would win now (two votes), so the group rebalances.
        b.protocols = join("g", "", &["range", "roundrobin"]).protocols;
        let back = groups.join(b, 1);
        assert!(
            matches!(back, Pending::Wait(_)),
            "a changed choice of protocol is a rebalance, not the current generation"
        );
        assert_eq!(
            groups.heartbeat("g", rejoin.generation, &a, 2),
            Some(KafkaError::RebalanceInProgress)
        );
        assert_eq!(
            groups.heartbeat("g", rejoin.generation, &b_id, 2),
            Some(KafkaError::UnknownMemberId),
            "the old id is gone"
        );
    }

    #[test]
    fn a_static_members_old_id_waiting_for_a_rebalance_is_fenced_when_it_comes_back() {
        let groups = Membership::default();
        let leader = first_member(&groups);
        now(groups.sync("g", 1, &leader, Vec::new(), 0));
        let mut static_join = join("g", "", &["range"]);
        static_join.instance_id = Some("instance-1".to_owned());
        // The static member joins: a rebalance starts, its join waits for the leader's.
        let Pending::Wait(mut waiting) = groups.join(static_join.clone(), 1) else {
            panic!("waits for the rebalance")
        };
        // It comes back under a new id while the rebalance is still open.
        let _back = groups.join(static_join, 2);
        let fenced = waiting.try_recv().expect("answered");
        assert_eq!(fenced.error, Some(KafkaError::FencedInstanceId));
    }

    #[test]
    fn a_member_id_given_after_a_restart_is_never_one_restored() {
        let groups = Membership::default();
        let first = now(groups.join(join("g", "", &["range"]), 5)).member_id;
        let joined = now(groups.join(join("g", &first, &["range"]), 5));
        now(groups.sync("g", joined.generation, &first, Vec::new(), 5));
        let stored = groups.take_unstored();
        // Restarted at the same millisecond (a clock stepped back): the counter starts again from 0.
        let restarted = Membership::restore(stored, 5, 0);
        let fresh = now(restarted.join(join("g", "", &["range"]), 5)).member_id;
        assert_ne!(fresh, first);
    }

    #[test]
    fn thousands_of_new_groups_lapse_with_their_sessions() {
        let groups = Membership::default();
        for index in 0..20_000 {
            let answer = now(groups.join(join(&format!("g{index}"), "", &["range"]), 0));
            assert_eq!(answer.error, Some(KafkaError::MemberIdRequired));
        }
        assert_eq!(groups.group_count(), 20_000);
        groups.tick(10_000);
        assert_eq!(
            groups.group_count(),
            0,
            "member ids never used lapse after the session timeout"
        );
    }

    #[test]
    fn oversized_metadata_and_assignments_are_refused_and_unknown_groups_answered() {
        let groups = Membership::default();
        let mut big = join("g", "", &["range"]);
        big.protocols[0].1 = Bytes::from(vec![0u8; MAX_MEMBER_BYTES + 1]);
        assert_eq!(
            now(groups.join(big, 0)).error,
            Some(KafkaError::InconsistentGroupProtocol)
        );
        let leader = first_member(&groups);
        let huge = vec![(leader.clone(), Bytes::from(vec![0u8; MAX_MEMBER_BYTES + 1]))];
        let refused = now(groups.sync("g", 1, &leader, huge, 0));
        assert_eq!(refused.error, Some(KafkaError::UnknownServerError));
        let fits = vec![(leader.clone(), Bytes::from_static(b"p0"))];
        assert_eq!(
            now(groups.sync("g", 1, &leader, fits, 0)).assignment,
            Bytes::from_static(b"p0")
        );
        assert_eq!(
            groups.heartbeat("nobody", 1, "m", 0),
            Some(KafkaError::UnknownMemberId)
        );
        assert_eq!(
            groups.leave("nobody", "m", None, 0),
            Some(KafkaError::UnknownMemberId)
        );
        let sync = now(groups.sync("nobody", 1, "m", Vec::new(), 0));
        assert_eq!(sync.error, Some(KafkaError::UnknownMemberId));
    }

    #[test]
    fn a_transactional_commit_must_name_a_current_member_but_a_rebalance_does_not_refuse_it() {
        let groups = Membership::default();
        assert_eq!(
            groups.check_txn_commit("g", -1, "", None),
            None,
            "no group, no member named"
        );
        assert_eq!(
            groups.check_txn_commit("g", 1, "m", None),
            Some(KafkaError::UnknownMemberId)
        );
        let first = first_member(&groups);
        now(groups.sync("g", 1, &first, Vec::new(), 0));
        assert_eq!(groups.check_txn_commit("g", 1, &first, None), None);
        assert_eq!(
            groups.check_txn_commit("g", 2, &first, None),
            Some(KafkaError::IllegalGeneration)
        );
        assert_eq!(
            groups.check_txn_commit("g", 1, "other", None),
            Some(KafkaError::UnknownMemberId)
        );
        // A second member starts a rebalance: the first may still commit its transaction at generation 1.
        let second = now(groups.join(join("g", "", &["range"]), 1)).member_id;
        let _waiting = groups.join(join("g", &second, &["range"]), 1);
        assert_eq!(groups.check_txn_commit("g", 1, &first, None), None);
    }

    #[test]
    fn a_group_is_handed_out_for_storing_once_per_completed_rebalance_and_restored_with_fresh_sessions() {
        let groups = Membership::default();
        let id = first_member(&groups);
        assert!(
            groups.take_unstored().is_empty(),
            "a rebalance waiting for its assignment is not stored"
        );
        let synced = now(groups.sync("g", 1, &id, vec![(id.clone(), Bytes::from("p0"))], 0));
        assert_eq!(synced.error, None);
        let stored = groups.take_unstored();
        assert_eq!(stored.len(), 1);
        assert!(groups.take_unstored().is_empty(), "nothing changed since");
        assert_eq!(groups.heartbeat("g", 1, &id, 5_000), None);
        assert!(
            groups.take_unstored().is_empty(),
            "a heartbeat changes nothing stored"
        );

        // Restored at 100 s: the member's session runs from then (10 s), so only silence after its last heartbeat
        // expires it.
        let restored = Membership::restore(stored, 100_000, 0);
        restored.tick(109_999);
        assert_eq!(restored.heartbeat("g", 1, &id, 109_999), None);
        restored.tick(119_998);
        assert_eq!(
            restored.describe_group("g").map(|g| g.state),
            Some(GroupState::Stable)
        );
        restored.tick(119_999);
        let emptied = restored.describe_group("g").expect("kept, empty");
        assert_eq!(emptied.state, GroupState::Empty);
        let stored = restored.take_unstored();
        assert_eq!(
            (stored.len(), stored[0].1.generation, stored[0].1.members.len()),
            (1, 2, 0)
        );
    }
}

/// The topics of a consumer's subscription (Kafka's `ConsumerProtocolSubscription`, any version: a version, then
/// the topic names; what follows is not read). `None` when the bytes do not hold one; every length is checked
/// against the bytes left.
fn subscription_topics(bytes: &[u8]) -> Option<Vec<String>> {
    let (_version, rest) = bytes.split_first_chunk::<2>()?;
    let (count, mut rest) = rest.split_first_chunk::<4>()?;
    let count = usize::try_from(i32::from_be_bytes(*count)).ok()?;
    // Every name takes at least its 2-byte length.
    if count > rest.len() / 2 {
        return None;
    }
    let mut topics = Vec::with_capacity(count);
    for _ in 0..count {
        let (length, after) = rest.split_first_chunk::<2>()?;
        let length = usize::try_from(i16::from_be_bytes(*length)).ok()?;
        let name = after.get(..length)?;
        topics.push(String::from_utf8(name.to_vec()).ok()?);
        rest = after.get(length..)?;
    }
    Some(topics)
}

#[cfg(test)]
mod subscription_tests {
    #![allow(clippy::unwrap_used)] // a test fails by panicking

    use super::subscription_topics;

    #[test]
    fn a_consumer_subscription_reads_its_topics_and_a_lying_count_reads_none() {
        let mut bytes = vec![0, 3, 0, 0, 0, 2];
        for topic in ["orders", "payments"] {
            bytes.extend_from_slice(&(topic.len() as i16).to_be_bytes());
            bytes.extend_from_slice(topic.as_bytes());
        }
        bytes.extend_from_slice(&[0xff, 0xff, 0xff, 0xff]); // user data: null; the rest is not read
        assert_eq!(subscription_topics(&bytes).unwrap(), ["orders", "payments"]);
        assert_eq!(
            subscription_topics(&[0, 0, 0x7f, 0xff, 0xff, 0xff]),
            None,
            "two billion topics in 6 bytes"
        );
        assert_eq!(
            subscription_topics(&[0, 0, 0, 0, 0, 1, 0, 9, b'a']),
            None,
            "a name past the end"
        );
        assert_eq!(subscription_topics(&[0]), None);
    }
}
