//! The seeded generator of the fuzz tests (SplitMix64): small and
//! deterministic, so a seed names the same frames on every run and a
//! failure is replayed by its printed seed.

use serde_json::{Value, json};

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

/// The fuzz suites' generator: [`SplitMix64`] and the JSON built from it,
/// its text mixing in the suite's `odd` characters.
pub struct Fuzz {
    rng: SplitMix64,
    odd: &'static [char],
}

impl std::ops::Deref for Fuzz {
    type Target = SplitMix64;
    fn deref(&self) -> &SplitMix64 {
        &self.rng
    }
}

impl std::ops::DerefMut for Fuzz {
    fn deref_mut(&mut self) -> &mut SplitMix64 {
        &mut self.rng
    }
}

impl Fuzz {
    /// The generator of `seed`, its text mixing in `odd`.
    pub fn new(seed: u64, odd: &'static [char]) -> Self {
        Self {
            rng: SplitMix64(seed),
            odd,
        }
    }

    /// Text of up to `max` characters (see [`SplitMix64::text`]).
    pub fn text(&mut self, max: usize) -> String {
        self.rng.text(max, self.odd)
    }

    /// A JSON value of any type, nested at most `depth` deep.
    pub fn value(&mut self, depth: usize) -> Value {
        match self.below(if depth == 0 { 5 } else { 7 }) {
            0 => Value::Null,
            1 => json!(self.below(2) == 0),
            2 => json!(self.next_u64() as i64),
            3 => json!(self.below(1000) as f64 / 8.0),
            4 => json!(self.text(12)),
            5 => Value::Array((0..self.below(4)).map(|_| self.value(depth - 1)).collect()),
            _ => self.object(depth - 1),
        }
    }

    /// A JSON object of up to three members, nested at most `depth` deep.
    pub fn object(&mut self, depth: usize) -> Value {
        Value::Object(
            (0..self.below(4))
                .map(|_| (self.text(8), self.value(depth)))
                .collect(),
        )
    }

    /// A JSON value of any type as text, where numbers no float holds
    /// (huge integers, `-1e308`) stay literal.
    pub fn literal(&mut self, depth: usize) -> String {
        match self.below(if depth == 0 { 7 } else { 9 }) {
            0 => "null".into(),
            1 => (self.below(2) == 0).to_string(),
            2 => (self.next_u64() as i64).to_string(),
            3 => format!("{}.{}", self.below(1000), self.below(100)),
            4 => "123456789012345678901234567890123456789".into(),
            5 => "-1e308".into(),
            6 => Value::String(self.text(12)).to_string(),
            7 => {
                let items: Vec<String> = (0..self.below(4))
                    .map(|_| self.literal(depth - 1))
                    .collect();
                format!("[{}]", items.join(","))
            }
            _ => self.literal_object(depth - 1),
        }
    }

    /// A JSON object as text whose keys start with `k` (never a JSON-RPC
    /// member), its values [`Fuzz::literal`].
    pub fn literal_object(&mut self, depth: usize) -> String {
        let members: Vec<String> = (0..self.below(4))
            .map(|_| {
                let key = Value::String(format!("k{}", self.text(6))).to_string();
                format!("{key}:{}", self.literal(depth))
            })
            .collect();
        format!("{{{}}}", members.join(","))
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

    #[test]
    fn a_fuzz_literal_is_json_and_a_seed_repeats_it() {
        let (mut a, mut b) = (Fuzz::new(3, &['"']), Fuzz::new(3, &['"']));
        for _ in 0..50 {
            let text = a.literal_object(2);
            assert!(serde_json::from_str::<Value>(&text).is_ok(), "{text}");
            assert_eq!(text, b.literal_object(2));
            assert!(a.object(2).is_object());
            b.object(2);
        }
    }
}
