//! The physical order of a schema's keys: a seeded permutation of 1..=n computed one key at a
//! time, so the loader holds no list of keys (a 100 TB data set is 13 billion of them).
//!
//! Method: a keyed Feistel network on the smallest power of two 2^b >= n, with cycle walking
//! (Black and Rogaway, "Ciphers with Arbitrary Finite Domains", CT-RSA 2002). Each Feistel
//! round maps a b-bit value (L, R) to (R, L xor F(R)); the halves may differ in width when b
//! is odd, and swap widths each round. Every round is invertible whatever F is, so the network
//! is a bijection on [0, 2^b). Cycle walking applies the network again until the value falls
//! below n: the cycle through a value below n must come back below n, so the walk ends, and
//! restricting a bijection this way gives a bijection on [0, n). Since 2^b < 2n, the expected
//! number of network passes per key is below 2.

/// Feistel rounds; four make a pseudo-random permutation (Luby-Rackoff), six leave margin.
const ROUNDS: usize = 6;

/// A seeded bijection from positions 0..n to keys 1..=n.
#[derive(Debug, Clone)]
pub struct KeyOrder {
    n: u64,
    bits: u32,
    round_keys: [u64; ROUNDS],
}

impl KeyOrder {
    /// The permutation of 1..=`n` fixed by `seed` (the same seed gives the same order).
    pub fn new(n: u64, seed: u64) -> Self {
        let bits = if n <= 1 {
            0
        } else {
            64 - (n - 1).leading_zeros()
        };
        let mut state = seed;
        let round_keys = std::array::from_fn(|_| splitmix64(&mut state));
        KeyOrder {
            n,
            bits,
            round_keys,
        }
    }

    pub fn len(&self) -> u64 {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The key stored at physical position `position` (0-based, below `len()`).
    pub fn key_at(&self, position: u64) -> u64 {
        // Beyond n the walk might never come back below n: a caller bug, not input.
        assert!(position < self.n, "position {position} of {}", self.n);
        let mut x = position;
        loop {
            x = self.network(x);
            if x < self.n {
                return x + 1;
            }
        }
    }

    /// Keys in physical order, one at a time.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        (0..self.n).map(|p| self.key_at(p))
    }

    fn network(&self, x: u64) -> u64 {
        if self.bits == 0 {
            return x;
        }
        // Left half `left_bits` wide, right half `right_bits` wide; they swap each round.
        let mut right_bits = self.bits / 2;
        let mut left_bits = self.bits - right_bits;
        let mut left = x >> right_bits;
        let mut right = x & mask(right_bits);
        for k in &self.round_keys {
            let mixed = (left ^ round_function(right, *k)) & mask(left_bits);
            left = right;
            right = mixed;
            std::mem::swap(&mut left_bits, &mut right_bits);
        }
        (left << right_bits) | right
    }
}

fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// The round function: a 64-bit finalizer (MurmurHash3's fmix64) over the half and the key.
fn round_function(half: u64, key: u64) -> u64 {
    let mut z = half ^ key;
    z = (z ^ (z >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
    z = (z ^ (z >> 33)).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    z ^ (z >> 33)
}

/// SplitMix64 (Steele, Lea and Flood 2014): round keys from the seed.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every n from 0 to 600 (odd and even bit widths, powers of two and one past them) and
    /// several seeds: each key of 1..=n appears exactly once.
    #[test]
    fn is_a_bijection_on_one_to_n_for_small_n_and_several_seeds() {
        for seed in [0, 1, 7, 42, u64::MAX, 0x9E37_79B9_7F4A_7C15] {
            for n in 0..=600u64 {
                let order = KeyOrder::new(n, seed);
                let mut seen = vec![false; n as usize + 1];
                for key in order.iter() {
                    assert!((1..=n).contains(&key), "n {n} seed {seed}: key {key}");
                    assert!(!seen[key as usize], "n {n} seed {seed}: key {key} twice");
                    seen[key as usize] = true;
                }
                assert_eq!(order.iter().count() as u64, n);
            }
        }
    }

    #[test]
    fn is_a_bijection_at_powers_of_two_and_their_neighbours() {
        for n in [1u64 << 12, (1 << 12) + 1, (1 << 13) - 1, (1 << 16) + 3] {
            let order = KeyOrder::new(n, 3);
            let mut seen = vec![false; n as usize + 1];
            for key in order.iter() {
                assert!(!seen[key as usize], "n {n}: key {key} twice");
                seen[key as usize] = true;
            }
            assert!(seen[1..].iter().all(|s| *s), "n {n}: a key is missing");
        }
    }

    #[test]
    fn the_seed_fixes_the_order() {
        let a: Vec<u64> = KeyOrder::new(1000, 5).iter().collect();
        let b: Vec<u64> = KeyOrder::new(1000, 5).iter().collect();
        let c: Vec<u64> = KeyOrder::new(1000, 6).iter().collect();
        assert_eq!(a, b);
        let same = a.iter().zip(&c).filter(|(x, y)| x == y).count();
        assert!(same < 20, "seeds 5 and 6 agree on {same} of 1000 positions");
    }

    /// Consecutive keys land far apart: a range of 64 keys must touch 64 scattered blocks.
    #[test]
    fn consecutive_keys_are_scattered() {
        let n = 4000u64;
        let order = KeyOrder::new(n, 11);
        let mut position = vec![0u64; n as usize + 1];
        for (p, key) in order.iter().enumerate() {
            position[key as usize] = p as u64;
        }
        let range = &position[1..=64];
        let spread = range.iter().max().unwrap_or(&0) - range.iter().min().unwrap_or(&0);
        assert!(
            spread > 3000,
            "64 consecutive keys span only {spread} of 4000 positions"
        );
        let adjacent = (1..n as usize)
            .filter(|&k| position[k].abs_diff(position[k + 1]) == 1)
            .count();
        assert!(
            adjacent < 20,
            "{adjacent} of 3999 key pairs are physical neighbours"
        );
    }

    /// A data set of 100 TB in 8 kB blocks: constant memory, and any position answers at once.
    #[test]
    fn huge_domains_need_no_memory() {
        let n = 100u64 << 40 >> 13;
        let order = KeyOrder::new(n, 1);
        for p in [0, 1, n / 2, n - 1] {
            let k = order.key_at(p);
            assert!((1..=n).contains(&k));
        }
        assert_eq!(std::mem::size_of::<KeyOrder>(), 8 * (ROUNDS + 2));
    }
}
