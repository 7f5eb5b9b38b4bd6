//! The one source of choices: a seeded xorshift generator (portable and stable across platforms, so a seed means
//! the same run everywhere). Nothing in the simulator reads the clock or iterates a hash map.

use rand_core::{Rng, SeedableRng};
use rand_xorshift::XorShiftRng;

/// A seeded generator with the few draws the simulator needs.
#[derive(Debug, Clone)]
pub struct SimRng(XorShiftRng);

impl SimRng {
    /// The generator of `seed`.
    pub fn new(seed: u64) -> Self {
        SimRng(XorShiftRng::seed_from_u64(seed))
    }

    /// A number in `0..n` (`0` when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.0.next_u64() % n
        }
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// One element of `items` (`None` when empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        let index = usize::try_from(self.below(items.len() as u64)).ok()?;
        items.get(index)
    }
}
