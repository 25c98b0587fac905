//! One 64-bit digest of a byte string, for the name table's slots and for
//! telling two reads of an input apart.
//!
//! Eight bytes a step (a multiply and a rotate), the length absorbed
//! first and the tail padded with zeros, then splitmix64's finalizer so
//! that every output bit depends on every input bit (the name table takes
//! its slot from the low bits and its tag from the high ones). Not a
//! cryptographic hash: inputs made to collide can; an accidental edit of
//! an input collides with a chance of about 2^-64. Deterministic on every
//! platform (little-endian words whatever the target).

use crate::rng::mix64;

/// The odd multiplier of each step (2^64 over the golden ratio).
const K: u64 = 0x9e37_79b9_7f4a_7c15;

/// The digest of `bytes` (see the module doc).
pub fn digest(bytes: &[u8]) -> u64 {
    let mut h = (bytes.len() as u64).wrapping_mul(K);
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        let mut a = [0u8; 8];
        a.copy_from_slice(w);
        h = step(h, u64::from_le_bytes(a));
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        let mut a = [0u8; 8];
        for (d, s) in a.iter_mut().zip(tail) {
            *d = *s;
        }
        h = step(h, u64::from_le_bytes(a));
    }
    mix64(h)
}

#[inline]
fn step(h: u64, w: u64) -> u64 {
    (h ^ w).wrapping_mul(K).rotate_left(29)
}

#[cfg(test)]
mod tests {
    use super::digest;

    #[test]
    fn every_byte_and_the_length_move_the_digest() {
        let base: alloc::vec::Vec<u8> = (0..37u8).collect();
        let d = digest(&base);
        for i in 0..base.len() {
            let mut b = base.clone();
            b[i] ^= 1;
            assert_ne!(digest(&b), d, "byte {i}");
        }
        // A zero byte more or less (the padded tail alone would not see it).
        let mut longer = base.clone();
        longer.push(0);
        assert_ne!(digest(&longer), d);
        assert_ne!(digest(&base[..36]), d);
        assert_ne!(digest(b""), digest(b"\0"));
    }

    #[test]
    fn short_names_spread_over_low_and_high_bits() {
        // Names that differ in one digit: their low 10 bits (a 1,024-slot
        // table) and their top 6 bits (the tag) take many values.
        let mut low = [false; 1024];
        let mut high = [false; 64];
        for i in 0..1024u32 {
            let name = alloc::format!("%t{i}");
            let h = digest(name.as_bytes());
            low[(h & 1023) as usize] = true;
            high[(h >> 58) as usize] = true;
        }
        assert!(low.iter().filter(|&&x| x).count() > 600);
        assert!(high.iter().all(|&x| x));
    }
}
