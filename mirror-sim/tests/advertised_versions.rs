//! The simulator exercises the code `serve` runs only if its clients ask what a real client can: every request it
//! sends is at a version `serve` advertises (found sending AddOffsetsToTxn v3 while `serve` advertises 0–2).

use mirror_sim::world::versions::SENT;

#[test]
fn every_request_the_simulated_clients_send_is_at_a_version_serve_advertises() {
    let outside: Vec<String> = SENT
        .iter()
        .filter(|&&(key, version)| !broker::versions::supported(key, version))
        .map(|(key, version)| {
            format!(
                "{key:?} v{version} (serve advertises {:?})",
                broker::versions::range(*key)
            )
        })
        .collect();
    assert!(outside.is_empty(), "{outside:?}");
}
