//! The crate's pseudo-random generators, each step written once: splitmix64
//! (a stream and its one-shot mix), xorshift32, xorshift64 and xorshift64*.
//!
//! Every use is deterministic in its seed: the generators only break ties,
//! shape treaps or draw test and workload inputs, so a seed must give the
//! same sequence on every platform and for every build (goldens depend on
//! it). Nothing here is for secrets.

/// The splitmix64 increment (2^64 divided by the golden ratio, odd).
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// One step of splitmix64: advances `state` by the increment and returns
/// the mixed state. A bijection of a counter, so distinct states give
/// distinct outputs and state 0 is as good a seed as any.
pub const fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(GOLDEN);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// splitmix64's first output from state `x`: a well-spread 64-bit hash of a
/// key (noise per attempt, a seed from an address), bijective in `x`.
pub const fn mix64(x: u64) -> u64 {
    let mut state = x;
    splitmix64(&mut state)
}

/// The splitmix64 generator: small, fast, and good enough for workloads.
#[cfg(any(test, feature = "gen"))]
#[derive(Copy, Clone, Debug)]
pub struct SplitMix64(u64);

#[cfg(any(test, feature = "gen"))]
impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub const fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        splitmix64(&mut self.0)
    }

    /// A number in `0..n` (`n > 0`), by multiply-shift.
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// One step of Marsaglia's xorshift32 (shifts 13, 17, 5): advances `state`
/// and returns it. A non-zero state never becomes zero.
pub const fn xorshift32(state: &mut u32) -> u32 {
    let mut x = *state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    *state = x;
    x
}

/// One step of Marsaglia's xorshift64 (shifts 13, 7, 17): advances `state`
/// and returns it. A non-zero state never becomes zero.
pub const fn xorshift64(state: &mut u64) -> u64 {
    let mut x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    x
}

/// One step of Vigna's xorshift64* (shifts 12, 25, 27, then a multiply that
/// scrambles the low bits): advances `state` and returns the scrambled word.
/// A non-zero state never becomes zero.
pub const fn xorshift64_star(state: &mut u64) -> u64 {
    let mut x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    x.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_reference_values() {
        // First outputs of splitmix64 from state 0 (Vigna's reference code).
        let mut s = 0u64;
        assert_eq!(splitmix64(&mut s), 0xE220_A839_7B1D_CDAF);
        assert_eq!(splitmix64(&mut s), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(mix64(0), 0xE220_A839_7B1D_CDAF);
        assert_eq!(mix64(GOLDEN), 0x6E78_9E6A_A1B9_65F4);
        let mut g = SplitMix64::new(0);
        assert_eq!(g.next_u64(), 0xE220_A839_7B1D_CDAF);
    }

    #[test]
    fn xorshift_first_steps_and_no_zero_state() {
        // Computed apart from this code from the published recurrences: a
        // bit-level check of the shifts and their directions.
        let (mut a, mut b, mut c) = (0x9E37_79B9u32, 1u64, 1u64);
        assert_eq!(xorshift32(&mut a), 0x510C_4619);
        assert_eq!(xorshift64(&mut b), 0x4082_2041);
        assert_eq!(xorshift64_star(&mut c), 0x47E4_CE4B_896C_DD1D);
        assert_eq!(c, 0x200_0001);
        for _ in 0..1000 {
            xorshift32(&mut a);
            xorshift64(&mut b);
            xorshift64_star(&mut c);
            assert!(a != 0 && b != 0 && c != 0);
        }
    }
}
