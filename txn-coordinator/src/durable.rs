//! The producer-id manager over durable storage: the reservation is a metadata record of the coordinator's
//! state partition (the role of Kafka's metadata log for producer-id blocks), written through the storage trait
//! before any id of a new block is issued.

use kafka_types::ProducerId;
use storage::PartitionStorage;

use crate::error::CoordinatorError;
use crate::producer_ids::{Issue, ProducerIdManager, Reservation};

/// The metadata key of the durable reservation (8 bytes, big-endian).
pub const RESERVATION_KEY: &str = "coordinator.producer-ids";

/// Reads the durable reservation and returns the manager that continues above it.
pub async fn recover(storage: &dyn PartitionStorage) -> Result<ProducerIdManager, CoordinatorError> {
    let reserved = match storage.metadata(RESERVATION_KEY).await? {
        None => None,
        Some(bytes) => Some(i64::from_be_bytes(bytes.as_slice().try_into().map_err(|_| {
            CoordinatorError::CorruptReservation(format!("expected 8 bytes, found {}", bytes.len()))
        })?)),
    };
    Ok(ProducerIdManager::recover(reserved))
}

/// Persists `reservation` (durably: metadata writes are) and tells the manager.
pub async fn persist(
    storage: &mut dyn PartitionStorage,
    manager: &mut ProducerIdManager,
    reservation: Reservation,
) -> Result<(), CoordinatorError> {
    storage
        .put_metadata(RESERVATION_KEY, &reservation.up_to.to_be_bytes())
        .await?;
    manager.reserved(reservation);
    Ok(())
}

/// Issues the next producer id, persisting a new block's reservation first when one is needed.
pub async fn issue(
    storage: &mut dyn PartitionStorage,
    manager: &mut ProducerIdManager,
) -> Result<ProducerId, CoordinatorError> {
    loop {
        match manager.next_id()? {
            Issue::Id(id) => return Ok(id),
            Issue::Reserve(reservation) => persist(storage, manager, reservation).await?,
        }
    }
}

/// Moves the allocator past `id` (every later id is greater), durably before it returns.
pub async fn advance_past(
    storage: &mut dyn PartitionStorage,
    manager: &mut ProducerIdManager,
    id: i64,
) -> Result<(), CoordinatorError> {
    if let Some(reservation) = manager.advance_past(id)? {
        persist(storage, manager, reservation).await?;
    }
    Ok(())
}
