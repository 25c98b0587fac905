//! The storage budget of a run, and what a reservation is made of.
//!
//! Every workspace reserves its storage once, before the passes run
//! (docs/SEMANTICS.md §4). Most of it is linear in the module (columns, analyses, the
//! allocators' per-location tables). A few methods need storage that grows
//! faster than the input — the exact placement search (sections × partition
//! stripes, and its search stacks), the coloring allocator's interference
//! graph (edges), the dataflow checker's scratch (runs per read) — and on a
//! small but dense input they would ask for gigabytes. Those consult the
//! run's [`StorageBudget`] before they reserve: a method that does not fit
//! what the linear part left is skipped (or runs with less storage and
//! stops early), and the reservation's [`StorageReport`] says which and
//! why, in the user's words. The result stays correct: every skipped
//! method has a linear fallback (greedy placement for the search and the
//! graph; the checker's growth stops at the budget with an error instead
//! of an abort).
//!
//! Sizes here are estimates of heap bytes (`capacity × size_of`), not
//! allocator measurements: they exclude allocator overhead and the
//! inline part of each struct.

use alloc::vec::Vec;
use arrayvec::ArrayVec;
use core::fmt;

/// The most bytes one run may reserve. `None` in [`crate::pipeline::Options`]
/// means [`StorageBudget::default_for`] of the module.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct StorageBudget {
    /// Bytes.
    pub limit: u64,
    /// Bytes the budget keeps free past whatever is reserved: the limit
    /// rises with the reservation so that at least this much remains.
    /// Zero for a caller's budget (`--max-memory`), a hard limit; the
    /// default budget's room (`DEFAULT_BUDGET_ROOM_PER_MODULE_BYTE` times the module).
    pub room: u64,
}

/// The floor of the default budget: small modules may use this much
/// whatever their size (every method of a kernel-sized module fits in it).
pub const DEFAULT_BUDGET_FLOOR: u64 = 1 << 30;

/// The default budget per byte of the module's own storage: the passes'
/// linear workspaces take a few times the module; the factor leaves room
/// for the superlinear methods on inputs where they pay.
pub const DEFAULT_BUDGET_PER_MODULE_BYTE: u64 = 8;

/// Room the default budget keeps free past whatever is reserved, per byte
/// of the module. On a large module the passes' linear tables alone can
/// take most of `DEFAULT_BUDGET_PER_MODULE_BYTE` times the module (7.3
/// times at optlevel 2 with both checks), and what they leave is all the
/// superlinear methods and the dataflow checker's growth get: the room
/// keeps them from being crowded out, so that a checked run places as an
/// unchecked one and its check completes. The limit stays linear in the
/// module, as every reservation is.
pub const DEFAULT_BUDGET_ROOM_PER_MODULE_BYTE: u64 = 2;

/// Each method whose storage grows faster than the input gets at most this
/// many bytes per byte reserved before it (the module and the passes'
/// linear tables) ...
pub const SUPERLINEAR_PER_LINEAR_BYTE: u64 = 16;

/// ... or this much, whichever is more, so that kernel-sized modules can
/// run the exact search (and never more than the budget leaves).
pub const SUPERLINEAR_FLOOR: u64 = 64 << 20;

impl StorageBudget {
    /// No limit.
    pub const UNLIMITED: StorageBudget = StorageBudget {
        limit: u64::MAX,
        room: 0,
    };

    /// A budget of `limit` bytes.
    pub const fn bytes(limit: u64) -> StorageBudget {
        StorageBudget { limit, room: 0 }
    }

    /// The default for a module whose own storage is `module_bytes`:
    /// `DEFAULT_BUDGET_PER_MODULE_BYTE` times that, at least
    /// `DEFAULT_BUDGET_FLOOR`, and at least
    /// `DEFAULT_BUDGET_ROOM_PER_MODULE_BYTE` times that past what is
    /// reserved.
    pub fn default_for(module_bytes: u64) -> StorageBudget {
        StorageBudget {
            limit: module_bytes
                .saturating_mul(DEFAULT_BUDGET_PER_MODULE_BYTE)
                .max(DEFAULT_BUDGET_FLOOR),
            room: module_bytes.saturating_mul(DEFAULT_BUDGET_ROOM_PER_MODULE_BYTE),
        }
    }
}

/// Heap bytes a container holds reserved.
pub trait HeapBytes {
    /// Reserved heap bytes (capacity × element size).
    fn heap_bytes(&self) -> u64;
}

impl<T> HeapBytes for Vec<T> {
    fn heap_bytes(&self) -> u64 {
        (self.capacity() as u64).saturating_mul(core::mem::size_of::<T>() as u64)
    }
}

impl<T: Ord> HeapBytes for alloc::collections::BinaryHeap<T> {
    fn heap_bytes(&self) -> u64 {
        (self.capacity() as u64).saturating_mul(core::mem::size_of::<T>() as u64)
    }
}

impl<T: HeapBytes> HeapBytes for Option<T> {
    fn heap_bytes(&self) -> u64 {
        self.as_ref().map_or(0, HeapBytes::heap_bytes)
    }
}

/// The sum of `heap_bytes()` of the listed fields: containers through
/// [`HeapBytes`], nested workspaces through their own `heap_bytes`, so a
/// workspace's total is one list of everything it owns.
macro_rules! heap_bytes {
    ($($e:expr),* $(,)?) => {{
        #[allow(unused_imports)]
        use $crate::storage::HeapBytes as _;
        0u64 $(.saturating_add($e.heap_bytes()))*
    }};
}
pub(crate) use heap_bytes;

/// Grows `v`'s capacity to at least `n` elements (whatever its length).
pub(crate) fn grow<T>(v: &mut Vec<T>, n: usize) {
    v.reserve(n.saturating_sub(v.len()));
}

/// Makes `dst` equal to `src`, reserving at least `src`'s room first: no
/// allocation when `dst` already has it (a copy made the same way).
pub(crate) fn copy_into<T: Clone>(dst: &mut Vec<T>, src: &Vec<T>) {
    dst.clear();
    dst.reserve_exact(src.capacity());
    dst.extend_from_slice(src);
}

/// Makes `v` exactly `n` copies of `x` for the next problem, in the storage
/// it holds (no allocation when `n` is within its capacity).
pub(crate) fn refill<T: Clone>(v: &mut Vec<T>, n: usize, x: T) {
    v.clear();
    v.resize(n, x);
}

/// Bytes a vector of `n` items of `T` reserves.
pub const fn bytes_of<T>(n: usize) -> u64 {
    (n as u64).saturating_mul(core::mem::size_of::<T>() as u64)
}

/// One component of a reservation.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct StoragePart {
    /// Which component (`"module: instruction columns"`, `"coloring"`, …).
    pub what: &'static str,
    /// Reserved heap bytes.
    pub bytes: u64,
}

/// A method a reservation left out (or cut short) because the budget had no
/// room for it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Skipped {
    /// The method, in the user's words ("exact placement search of SB").
    pub method: &'static str,
    /// What runs instead ("the coloring allocator's placement").
    pub instead: &'static str,
    /// Bytes it would have needed.
    pub needed: u64,
    /// Bytes its share of the budget was ([`StorageReport::allowance`]).
    pub available: u64,
    /// True when the method runs, with less storage than it could use (it
    /// stops early instead of growing); false when it does not run.
    pub cut_short: bool,
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = if self.cut_short {
            "cut short"
        } else {
            "skipped"
        };
        write!(
            f,
            "{} {what}: it needs {} bytes, its share of the storage budget (--max-memory) is {}; {} instead",
            self.method, self.needed, self.available, self.instead
        )
    }
}

/// Most components one report lists.
pub const MAX_PARTS: usize = 24;
/// Most skipped methods one report lists.
pub const MAX_SKIPPED: usize = 8;

/// What a reservation is made of, and what it left out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StorageReport {
    /// The budget the reservation kept to (raised by its room as the
    /// reservation grew: [`StorageBudget::room`]).
    pub limit: u64,
    /// [`StorageBudget::room`].
    pub room: u64,
    /// The components, in reservation order.
    pub parts: ArrayVec<StoragePart, MAX_PARTS>,
    /// Methods skipped or cut short for the budget.
    pub skipped: ArrayVec<Skipped, MAX_SKIPPED>,
    /// Skip records that came once `skipped` was full: counted, so that a
    /// report says there were more (without their storage, a repeat of an
    /// unlisted record cannot be told from a new one and counts again).
    pub skipped_unlisted: u32,
}

impl StorageReport {
    /// An empty report under `budget`.
    pub fn new(budget: StorageBudget) -> StorageReport {
        StorageReport {
            limit: budget.limit,
            room: budget.room,
            ..StorageReport::default()
        }
    }

    /// Records a component: added to the part of the same name when there
    /// is one (two workspaces of one kind read as one part); the last slot
    /// sums the components beyond `MAX_PARTS`, so totals stay exact.
    pub fn add(&mut self, what: &'static str, bytes: u64) {
        if let Some(part) = self.parts.iter_mut().find(|p| p.what == what) {
            part.bytes = part.bytes.saturating_add(bytes);
        } else if self.parts.is_full() {
            if let Some(last) = self.parts.last_mut() {
                last.what = "other";
                last.bytes = last.bytes.saturating_add(bytes);
            }
        } else {
            self.parts.push(StoragePart { what, bytes });
        }
        if self.room > 0 {
            self.limit = self.limit.max(self.total().saturating_add(self.room));
        }
    }

    /// Records a skipped method: a record already listed is not listed
    /// again; beyond `MAX_SKIPPED` the first ones stay listed and the rest
    /// are counted in `skipped_unlisted`.
    pub fn skip(&mut self, s: Skipped) {
        if !self.skipped.contains(&s) && self.skipped.try_push(s).is_err() {
            self.skipped_unlisted = self.skipped_unlisted.saturating_add(1);
        }
    }

    /// Bytes reserved in all.
    pub fn total(&self) -> u64 {
        self.parts
            .iter()
            .fold(0u64, |n, p| n.saturating_add(p.bytes))
    }

    /// Bytes the budget still allows.
    pub fn remaining(&self) -> u64 {
        self.limit.saturating_sub(self.total())
    }

    /// Bytes the next superlinear method may reserve: what the budget
    /// leaves, but no more than `SUPERLINEAR_PER_LINEAR_BYTE` times what
    /// is reserved so far (at least `SUPERLINEAR_FLOOR`) — so that such
    /// a method's storage stays a documented factor of the input, however
    /// generous the budget.
    pub fn allowance(&self) -> u64 {
        let cap = self
            .total()
            .saturating_mul(SUPERLINEAR_PER_LINEAR_BYTE)
            .max(SUPERLINEAR_FLOOR);
        self.remaining().min(cap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_and_remaining_follow_the_parts() {
        let mut r = StorageReport::new(StorageBudget::bytes(1000));
        r.add("a", 300);
        r.add("b", 200);
        assert_eq!(r.total(), 500);
        assert_eq!(r.remaining(), 500);
        r.add("c", 900);
        assert_eq!(r.remaining(), 0);
    }

    #[test]
    fn the_default_budget_keeps_its_room_past_the_reservation() {
        // Module of 100 bytes: limit 800 (no floor here), room 200.
        let budget = StorageBudget {
            limit: 100 * DEFAULT_BUDGET_PER_MODULE_BYTE,
            room: 100 * DEFAULT_BUDGET_ROOM_PER_MODULE_BYTE,
        };
        let mut r = StorageReport::new(budget);
        r.add("linear", 500);
        assert_eq!((r.limit, r.remaining()), (800, 300));
        r.add("more linear", 250);
        assert_eq!((r.limit, r.remaining()), (950, 200));
        // A caller's budget is a hard limit.
        let mut hard = StorageReport::new(StorageBudget::bytes(800));
        hard.add("linear", 750);
        assert_eq!((hard.limit, hard.remaining()), (800, 50));
        assert_eq!(StorageBudget::default_for(1 << 30).room, 2 << 30);
    }

    #[test]
    fn allowance_is_a_factor_of_what_is_reserved() {
        let mut r = StorageReport::new(StorageBudget::UNLIMITED);
        r.add("a", 1000);
        assert_eq!(r.allowance(), SUPERLINEAR_FLOOR);
        r.add("b", SUPERLINEAR_FLOOR);
        assert_eq!(
            r.allowance(),
            (SUPERLINEAR_FLOOR + 1000) * SUPERLINEAR_PER_LINEAR_BYTE
        );
        let mut tight = StorageReport::new(StorageBudget::bytes(5000));
        tight.add("a", 1000);
        assert_eq!(tight.allowance(), 4000);
    }

    #[test]
    fn overflowing_parts_are_summed_not_dropped() {
        // Distinct names: a repeated one is summed into its part.
        const NAMES: [&str; MAX_PARTS + 5] = [
            "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q",
            "r", "s", "t", "u", "v", "w", "x", "y", "z", "0", "1", "2",
        ];
        let mut r = StorageReport::new(StorageBudget::UNLIMITED);
        for what in NAMES {
            r.add(what, 10);
        }
        assert_eq!(r.parts.len(), MAX_PARTS);
        assert_eq!(r.total(), 10 * (MAX_PARTS as u64 + 5));
        assert_eq!(r.parts.last().map(|p| p.what), Some("other"));
    }

    #[test]
    fn a_part_recorded_twice_is_one_part_with_both_sizes() {
        let mut r = StorageReport::new(StorageBudget::UNLIMITED);
        r.add("tables", 10);
        r.add("graph", 5);
        r.add("tables", 7);
        assert_eq!(r.parts.len(), 2);
        assert_eq!(r.parts[0].what, "tables");
        assert_eq!(r.parts[0].bytes, 17);
        assert_eq!(r.total(), 22);
    }

    #[test]
    fn skipped_methods_beyond_the_list_are_counted_not_dropped() {
        const METHODS: [&str; MAX_SKIPPED + 3] = [
            "m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "m9", "m10",
        ];
        let mut r = StorageReport::new(StorageBudget::bytes(10));
        for method in METHODS {
            let s = Skipped {
                method,
                instead: "greedy",
                needed: 100,
                available: 10,
                cut_short: false,
            };
            r.skip(s);
            // A listed record is not listed twice; an unlisted one counts
            // again.
            r.skip(s);
        }
        assert_eq!(r.skipped.len(), MAX_SKIPPED);
        assert_eq!(r.skipped[0].method, "m0");
        assert_eq!(r.skipped_unlisted, 2 * 3);
    }

    #[test]
    fn default_budget_scales_with_the_module() {
        assert_eq!(StorageBudget::default_for(0).limit, DEFAULT_BUDGET_FLOOR);
        assert_eq!(
            StorageBudget::default_for(1 << 30).limit,
            DEFAULT_BUDGET_PER_MODULE_BYTE << 30
        );
    }

    #[test]
    fn heap_bytes_counts_capacity() {
        let v: Vec<u64> = Vec::with_capacity(10);
        assert_eq!(v.heap_bytes(), 80);
        let o: Option<Vec<u32>> = Some(Vec::with_capacity(4));
        assert_eq!(crate::heap_bytes!(v, o), 96);
    }
}
