//! The run ids of the wide-id world: the whole valid alphabet and length
//! range, weighted towards the edges.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::run_id::RunId;

/// `n` distinct run ids drawn from the whole valid alphabet and length
/// range, weighted towards the edges: every other one 100 to 128 bytes
/// long, each with a share of capitals drawn from none, half and all (a
/// capital takes two bytes in a path), and every fourth the case variant
/// of the one before.
pub(super) fn wide_run_ids(n: usize, seed: u64) -> Vec<RunId> {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-";
    let mut rng = StdRng::seed_from_u64(seed ^ 0x1d5_a1fa_be75);
    let mut ids: Vec<RunId> = Vec::with_capacity(n);
    while ids.len() < n {
        let previous = ids.last().map(|id| id.as_str().to_string());
        let id = match previous {
            Some(previous)
                if ids.len() % 4 == 3 && previous.bytes().any(|b| b.is_ascii_alphabetic()) =>
            {
                previous
                    .chars()
                    .map(|c| {
                        if c.is_ascii_uppercase() {
                            c.to_ascii_lowercase()
                        } else {
                            c.to_ascii_uppercase()
                        }
                    })
                    .collect()
            }
            _ => {
                let len = if rng.random_bool(0.5) {
                    rng.random_range(100..=128)
                } else {
                    rng.random_range(1..=128)
                };
                let capitals = [0.0, 0.5, 1.0][rng.random_range(0..3)];
                (0..len)
                    .map(|_| {
                        let c = ALPHABET[rng.random_range(0..ALPHABET.len())] as char;
                        if c.is_ascii_alphabetic() && rng.random_bool(capitals) {
                            c.to_ascii_uppercase()
                        } else {
                            c.to_ascii_lowercase()
                        }
                    })
                    .collect::<String>()
            }
        };
        let id = RunId::new(id).expect("drawn from the valid alphabet and lengths");
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    ids
}
