//! The seeded generator of the fuzz tests (SplitMix64): small and
//! deterministic, so a seed names the same frames on every run and a
//! failure is replayed by its printed seed.

/// SplitMix64.
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// One of `items` (not empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// Text of up to `max` characters: printable ASCII, and one in four
    /// of them one of `odd` (control characters, quotes, separators, …).
    pub fn text(&mut self, max: usize, odd: &[char]) -> String {
        (0..self.below(max + 1))
            .map(|_| match self.below(4) {
                0 => *self.pick(odd),
                _ => char::from(b' ' + self.below(95) as u8),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_names_one_sequence() {
        let (mut a, mut b) = (SplitMix64(7), SplitMix64(7));
        let first: Vec<u64> = (0..4).map(|_| a.next_u64()).collect();
        assert_eq!(first, (0..4).map(|_| b.next_u64()).collect::<Vec<_>>());
        assert_ne!(first[0], SplitMix64(8).next_u64());
        let text = a.text(50, &['\0']);
        assert!(text.chars().count() <= 50);
        assert!(text.chars().all(|c| c == '\0' || (' '..='~').contains(&c)));
    }
}
