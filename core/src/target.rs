//! The target model: every number that describes the hardware.
//!
//! Passes read geometry and limits from a [`Target`]; no pass holds a hardware
//! literal of its own. The presets carry the public figures of `TARGETS.md`;
//! the figures marked doubtful there (usable scalar registers, PSUM usable
//! banks, the coalescing budget) are plain fields that a user overrides with
//! `target trn2 max-regs=62 psum-banks=7` in the text format or with the
//! driver's flags.

use core::fmt;

/// Which preset a target started from. `Custom` after any override.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Generation {
    /// trn1 / inf2, NeuronCore-v2.
    Trn1,
    /// trn2, NeuronCore-v3.
    Trn2,
    /// trn3, NeuronCore-v4.
    Trn3,
}

impl Generation {
    /// The spelling used in the text format and on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Generation::Trn1 => "trn1",
            Generation::Trn2 => "trn2",
            Generation::Trn3 => "trn3",
        }
    }

    /// Parses a preset name (`inf2` is an alias of `trn1`).
    pub fn from_name(s: &str) -> Option<Self> {
        match s {
            "trn1" | "inf2" => Some(Generation::Trn1),
            "trn2" => Some(Generation::Trn2),
            "trn3" => Some(Generation::Trn3),
            _ => None,
        }
    }
}

impl fmt::Display for Generation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One row of the start-partition rule: a tensor of at most
/// `max_partitions` partitions must start at a multiple of `granularity`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct StartRule {
    /// Upper bound (inclusive) of the partition counts this row covers.
    pub max_partitions: u16,
    /// Legal start partitions are the multiples of this.
    pub granularity: u16,
}

/// The throughput assumption of one compute engine in the schedule model
/// ([`Target::engine_cycles`]): a fixed issue cost per instruction plus the
/// elements of one partition row it processes (all partitions run in
/// parallel) over a rate. Estimates, not published figures: the public
/// documentation gives the clock and the engines' shape, not per-opcode
/// timings, so these are parameters of the model.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EngineCost {
    /// Cycles every instruction costs before its first element (dispatch,
    /// pipeline fill, semaphore handling).
    pub fixed_cycles: u32,
    /// Elements per partition processed per cycle (at least 1 is assumed).
    pub elems_per_cycle: u32,
}

/// Geometry, limits and cost figures of one NeuronCore generation.
///
/// Invariant: `sb_usable_bytes <= sb_physical_bytes`,
/// `psum_usable_banks <= psum_banks`, `start_rules` sorted by
/// `max_partitions` with the last row covering `sb_partitions`.
///
/// A preset by name, narrowed by the overrides a user gives
/// (`target trn2 sb-bytes=65536` in the text format), each range-checked
/// against the preset's physical limits:
///
/// ```
/// use tusk_core::target::TargetError;
/// use tusk_core::Target;
///
/// let mut t = Target::by_name("trn2").expect("a preset");
/// t.set("sb-bytes", 65536)?;
/// assert_eq!((t.sb_usable_bytes, t.customized), (65536, true));
/// // More SB than the part has is refused with the legal range.
/// let too_much = u64::from(t.sb_physical_bytes) + 1;
/// assert!(matches!(t.set("sb-bytes", too_much), Err(TargetError::BadValue { .. })));
/// assert!(matches!(t.set("sb-megabytes", 1), Err(TargetError::UnknownKey)));
/// # Ok::<(), TargetError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Target {
    /// The preset this target was made from.
    pub generation: Generation,
    /// True when any field was overridden after the preset.
    pub customized: bool,

    // --- SBUF -----------------------------------------------------------
    /// Partitions of the on-chip scratchpad (128).
    pub sb_partitions: u16,
    /// Physical bytes per SBUF partition.
    pub sb_physical_bytes: u32,
    /// Bytes per SBUF partition the allocator may use (the rest is reserved
    /// for the compiler's own use).
    pub sb_usable_bytes: u32,
    /// Minimum SBUF byte alignment.
    pub sb_min_align: u32,
    /// The start-partition rule, smallest tensors first.
    pub start_rules: [StartRule; 3],

    // --- PSUM -----------------------------------------------------------
    /// Partitions of the matmul accumulator (128).
    pub psum_partitions: u16,
    /// Banks per PSUM partition (8).
    pub psum_banks: u8,
    /// Banks the allocator may use (7 when a transpose lowering takes bank 7).
    pub psum_usable_banks: u8,
    /// Bytes per bank per partition (2 KiB).
    pub psum_bank_bytes: u32,
    /// How many consecutive banks one PSUM tensor may span (1; trn3: 8).
    pub psum_max_banks_per_tensor: u8,
    /// Minimum PSUM byte alignment.
    pub psum_min_align: u32,

    // --- DRAM -----------------------------------------------------------
    /// Bytes of the flat per-core DRAM space that spill slots and internal
    /// DRAM tensors are placed in.
    pub dram_bytes: u64,
    /// Minimum DRAM byte alignment of a placed location.
    pub dram_min_align: u32,

    // --- scalar registers -----------------------------------------------
    /// `MaxRegNumPerEngine`: 32-bit lanes the register colorer may use.
    pub max_regs: u16,
    /// Bytes of one scalar register lane (4: TARGETS.md gives the sequencer
    /// 64 × 32-bit registers). A spilled register's DRAM slot holds its
    /// lanes at this width.
    pub reg_lane_bytes: u8,

    // --- DMA ------------------------------------------------------------
    /// Bytes one descriptor moves at most (64 KiB).
    pub dma_descriptor_max_bytes: u32,
    /// Per-partition byte budget of a coalesced DMA (`tooLargeForCoalescing`).
    /// The reference keeps it in a per-arch constructor; this value is the
    /// 4 KiB at which TARGETS.md says a per-partition transfer saturates,
    /// times 16: large enough to merge tiles, small enough to keep queues fed.
    pub dma_coalesce_budget: u32,
    /// The element ceiling of `tooLargeForCoalescing` (1000).
    pub dma_coalesce_max_elements: u32,
    /// The count sanity limit of coalescing (2999, `< 0xBB7`).
    pub dma_coalesce_count_limit: u32,
    /// Coalescing only merges accesses whose alignment is at most this (8).
    pub dma_coalesce_align_gate: u32,
    /// Queues per DMA engine (16).
    pub dma_queues_per_engine: u8,
    /// Dimensions of a DMA access pattern (5).
    pub dma_max_dims: u8,
    /// Free dimensions of a compute access pattern (4).
    pub compute_max_dims: u8,

    // --- cost model -----------------------------------------------------
    /// Fixed cost of one DMA transfer in nanoseconds (about 1.3 µs).
    pub dma_fixed_ns: u32,
    /// DMA bandwidth of one engine in bytes per nanosecond (27 GB/s).
    pub dma_bytes_per_ns: u32,
    /// Engine clock in MHz, to turn nanoseconds into cycles in reports.
    pub clock_mhz: u32,
    /// Cycles of one scalar register spill store or reload on the sequencer,
    /// including its sync wait.
    pub reg_spill_cycles: u32,
    /// Fixed cycles of one on-chip engine copy (`tensor_copy`): dispatch and
    /// pipeline fill. An estimate, not a published figure.
    pub copy_fixed_cycles: u32,
    /// Bytes per partition an engine copy moves per cycle (all partitions in
    /// parallel). An estimate, not a published figure.
    pub copy_bytes_per_cycle: u32,
    /// Cost of one descriptor of a DMA transfer in nanoseconds, on top of
    /// [`Target::dma_fixed_ns`] and the bytes over the bandwidth. TARGETS.md
    /// says transfers below 256 B per partition are severely overhead-bound
    /// and 2 KiB is the recommended minimum: an overhead equal to moving
    /// 256 B at one engine's bandwidth (256 / 27 ≈ 10 ns) gives exactly that
    /// curve (50% at 256 B, 89% at 2 KiB, 94% at 4 KiB). An estimate.
    pub dma_descriptor_ns: u32,
    /// Per compute engine, in the order of [`crate::ir::Engine::ALL`]
    /// without the DMA entry (PE, ACT, DVE, POOL, SP): the schedule model's
    /// throughput assumptions ([`EngineCost`]).
    pub engine_costs: [EngineCost; COMPUTE_ENGINES],
}

/// Compute engines of a NeuronCore (PE, ACT, DVE, POOL and the SP
/// sequencer): the length of [`Target::engine_costs`] and the schedule
/// model's compute resources, before its DMA queues.
pub const COMPUTE_ENGINES: usize = 5;

/// What an override changed or why it was refused.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TargetError {
    /// The key is not a known override.
    UnknownKey,
    /// The value is not a number in the key's range.
    BadValue {
        /// Smallest legal value.
        min: u64,
        /// Largest legal value.
        max: u64,
    },
}

impl fmt::Display for TargetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TargetError::UnknownKey => f.write_str(
                "unknown target override (known: max-regs, psum-banks, sb-bytes, psum-span, dram-bytes, coalesce-budget, coalesce-count, coalesce-elements)",
            ),
            TargetError::BadValue { min, max } => {
                write!(f, "target override value must be a number in {min}..={max}")
            }
        }
    }
}

/// The names of the overrides [`Target::set`] accepts.
pub const OVERRIDE_KEYS: [&str; 8] = [
    "max-regs",
    "psum-banks",
    "sb-bytes",
    "psum-span",
    "dram-bytes",
    "coalesce-budget",
    "coalesce-count",
    "coalesce-elements",
];

impl Target {
    /// The preset for a generation, with every number of TARGETS.md.
    pub const fn preset(generation: Generation) -> Target {
        let (physical, usable, span) = match generation {
            Generation::Trn1 => (196_608, 180_224, 1),
            Generation::Trn2 => (229_376, 212_984, 1),
            Generation::Trn3 => (262_144, 245_752, 8),
        };
        Target {
            generation,
            customized: false,
            sb_partitions: 128,
            sb_physical_bytes: physical,
            sb_usable_bytes: usable,
            sb_min_align: 1,
            start_rules: [
                StartRule {
                    max_partitions: 32,
                    granularity: 32,
                },
                StartRule {
                    max_partitions: 64,
                    granularity: 64,
                },
                StartRule {
                    max_partitions: 128,
                    granularity: 128,
                },
            ],
            psum_partitions: 128,
            psum_banks: 8,
            psum_usable_banks: 8,
            psum_bank_bytes: 2048,
            psum_max_banks_per_tensor: span,
            psum_min_align: 4,
            dram_bytes: 16 << 30,
            dram_min_align: 64,
            max_regs: 64,
            reg_lane_bytes: 4,
            dma_descriptor_max_bytes: 64 * 1024,
            dma_coalesce_budget: 64 * 1024,
            dma_coalesce_max_elements: 1000,
            dma_coalesce_count_limit: 2999,
            dma_coalesce_align_gate: 8,
            dma_queues_per_engine: 16,
            dma_max_dims: 5,
            compute_max_dims: 4,
            dma_fixed_ns: 1300,
            dma_bytes_per_ns: 27,
            clock_mhz: 1400,
            reg_spill_cycles: 64,
            copy_fixed_cycles: 64,
            copy_bytes_per_cycle: 4,
            dma_descriptor_ns: 10,
            // PE streams one column of the moving operand per cycle (its
            // output's free size); ACT, DVE and POOL one element per
            // partition per cycle; ACT's issue is costlier (its function
            // table); SP only moves scalars.
            engine_costs: [
                EngineCost {
                    fixed_cycles: 64,
                    elems_per_cycle: 1,
                },
                EngineCost {
                    fixed_cycles: 224,
                    elems_per_cycle: 1,
                },
                EngineCost {
                    fixed_cycles: 64,
                    elems_per_cycle: 1,
                },
                EngineCost {
                    fixed_cycles: 64,
                    elems_per_cycle: 1,
                },
                EngineCost {
                    fixed_cycles: 16,
                    elems_per_cycle: 1,
                },
            ],
        }
    }

    /// The preset by name (`trn1`, `inf2`, `trn2`, `trn3`).
    pub fn by_name(name: &str) -> Option<Target> {
        Generation::from_name(name).map(Target::preset)
    }

    /// Applies one `key=value` override. Values are range-checked against
    /// the preset's physical limits.
    pub fn set(&mut self, key: &str, value: u64) -> Result<(), TargetError> {
        fn range(v: u64, min: u64, max: u64) -> Result<u64, TargetError> {
            if v < min || v > max {
                Err(TargetError::BadValue { min, max })
            } else {
                Ok(v)
            }
        }
        match key {
            "max-regs" => self.max_regs = range(value, 2, 4096)? as u16,
            "psum-banks" => self.psum_usable_banks = range(value, 1, self.psum_banks as u64)? as u8,
            "sb-bytes" => {
                self.sb_usable_bytes = range(value, 1, self.sb_physical_bytes as u64)? as u32
            }
            "psum-span" => {
                self.psum_max_banks_per_tensor = range(value, 1, self.psum_banks as u64)? as u8
            }
            "dram-bytes" => self.dram_bytes = range(value, 1, 1 << 48)?,
            "coalesce-budget" => self.dma_coalesce_budget = range(value, 1, 1 << 30)? as u32,
            "coalesce-count" => self.dma_coalesce_count_limit = range(value, 2, 1 << 20)? as u32,
            "coalesce-elements" => {
                self.dma_coalesce_max_elements = range(value, 1, 1 << 20)? as u32
            }
            _ => return Err(TargetError::UnknownKey),
        }
        self.customized = true;
        Ok(())
    }

    /// The current value of an override key, for printing.
    pub fn get(&self, key: &str) -> Option<u64> {
        Some(match key {
            "max-regs" => self.max_regs as u64,
            "psum-banks" => self.psum_usable_banks as u64,
            "sb-bytes" => self.sb_usable_bytes as u64,
            "psum-span" => self.psum_max_banks_per_tensor as u64,
            "dram-bytes" => self.dram_bytes,
            "coalesce-budget" => self.dma_coalesce_budget as u64,
            "coalesce-count" => self.dma_coalesce_count_limit as u64,
            "coalesce-elements" => self.dma_coalesce_max_elements as u64,
            _ => return None,
        })
    }

    /// Overrides whose value differs from the preset, as `(key, value)`.
    pub fn overrides(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        let preset = Target::preset(self.generation);
        OVERRIDE_KEYS.iter().filter_map(move |k| {
            let v = self.get(k)?;
            (preset.get(k) != Some(v)).then_some((*k, v))
        })
    }

    /// The granularity of legal start partitions for a tensor of `partitions`
    /// partitions (the start-partition rule), or `None` when no tensor that
    /// large fits.
    pub fn start_granularity(&self, partitions: u16) -> Option<u16> {
        if partitions == 0 || partitions > self.sb_partitions {
            return None;
        }
        self.start_rules
            .iter()
            .find(|r| partitions <= r.max_partitions)
            .map(|r| r.granularity)
    }

    /// True when `base` is a legal start partition for `partitions` partitions.
    pub fn is_legal_start(&self, base: u16, partitions: u16) -> bool {
        match self.start_granularity(partitions) {
            Some(g) => {
                base % g == 0 && base as u32 + partitions as u32 <= self.sb_partitions as u32
            }
            None => false,
        }
    }

    /// What a PSUM tensor of `bytes` bytes per partition holds: whole banks
    /// (a tensor starts on a bank boundary and an accumulation group owns
    /// its bank), so `bytes` rounded up to the bank size.
    pub const fn psum_footprint(&self, bytes: u64) -> u64 {
        crate::align::align_saturating(bytes, self.psum_bank_bytes as u64)
    }

    /// Usable PSUM bytes per partition.
    pub const fn psum_usable_bytes(&self) -> u32 {
        self.psum_bank_bytes * self.psum_usable_banks as u32
    }

    /// What the allocators may place in `space`: bytes per partition on
    /// chip (usable SB, usable PSUM banks), all of DRAM.
    pub const fn capacity(&self, space: crate::ir::Space) -> u64 {
        match space {
            crate::ir::Space::Sb => self.sb_usable_bytes as u64,
            crate::ir::Space::Psum => self.psum_usable_bytes() as u64,
            crate::ir::Space::Dram => self.dram_bytes,
        }
    }

    /// Estimated cycles of one DMA moving `bytes` bytes: the fixed cost plus
    /// bytes over one engine's bandwidth, converted at the engine clock.
    /// This is the cost model behind every "spill cycles" figure.
    pub const fn dma_cycles(&self, bytes: u64) -> u64 {
        let ns = self.dma_fixed_ns as u64 + bytes / self.dma_bytes_per_ns as u64;
        ns * self.clock_mhz as u64 / 1000
    }

    /// Estimated cycles of one on-chip engine copy moving
    /// `bytes_per_partition` bytes in every partition: the fixed cost plus
    /// the bytes over the copy rate. Weighed against [`Target::dma_cycles`]
    /// when a reload can be replaced by a copy of resident data.
    pub const fn copy_cycles(&self, bytes_per_partition: u64) -> u64 {
        let rate = if self.copy_bytes_per_cycle == 0 {
            1
        } else {
            self.copy_bytes_per_cycle as u64
        };
        self.copy_fixed_cycles as u64 + bytes_per_partition.div_ceil(rate)
    }
}

impl Target {
    /// Schedule-model cycles of one DMA transfer of `bytes` bytes in
    /// `descriptors` descriptors on one queue: the fixed cost, each
    /// descriptor's cost and the bytes over one engine's bandwidth, in
    /// nanoseconds converted at the engine clock.
    pub const fn dma_transfer_cycles(&self, bytes: u64, descriptors: u64) -> u64 {
        let bw = if self.dma_bytes_per_ns == 0 {
            1
        } else {
            self.dma_bytes_per_ns as u64
        };
        let ns = self.dma_fixed_ns as u64
            + descriptors.saturating_mul(self.dma_descriptor_ns as u64)
            + bytes.div_ceil(bw);
        ns.saturating_mul(self.clock_mhz as u64) / 1000
    }

    /// Schedule-model cycles of one compute instruction on `engine` (the
    /// index into [`Target::engine_costs`]) that processes `elems` elements
    /// per partition: the engine's fixed cost plus the elements over its
    /// rate. An engine index past the table costs its last entry's figures.
    pub fn engine_cycles(&self, engine: usize, elems: u64) -> u64 {
        let c = match self.engine_costs.get(engine) {
            Some(c) => *c,
            None => match self.engine_costs.last() {
                Some(c) => *c,
                None => EngineCost {
                    fixed_cycles: 0,
                    elems_per_cycle: 1,
                },
            },
        };
        c.fixed_cycles as u64 + elems.div_ceil(c.elems_per_cycle.max(1) as u64)
    }
}

impl Default for Target {
    fn default() -> Self {
        Target::preset(Generation::Trn2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_carry_targets_md_numbers() {
        let t1 = Target::preset(Generation::Trn1);
        assert_eq!(
            (t1.sb_physical_bytes, t1.sb_usable_bytes),
            (196_608, 180_224)
        );
        let t2 = Target::preset(Generation::Trn2);
        assert_eq!(
            (t2.sb_physical_bytes, t2.sb_usable_bytes),
            (229_376, 212_984)
        );
        let t3 = Target::preset(Generation::Trn3);
        assert_eq!(
            (t3.sb_physical_bytes, t3.sb_usable_bytes),
            (262_144, 245_752)
        );
        assert_eq!(t3.psum_max_banks_per_tensor, 8);
        assert_eq!(t2.psum_max_banks_per_tensor, 1);
        assert_eq!(t2.psum_usable_bytes(), 16 * 1024);
        assert_eq!(Target::by_name("inf2"), Some(t1));
    }

    #[test]
    fn start_partition_rule() {
        let t = Target::default();
        assert!(t.is_legal_start(0, 128));
        assert!(!t.is_legal_start(64, 65));
        assert!(t.is_legal_start(64, 64));
        assert!(!t.is_legal_start(32, 64));
        assert!(t.is_legal_start(96, 32));
        assert!(!t.is_legal_start(96, 33));
        assert!(!t.is_legal_start(16, 1));
        assert!(!t.is_legal_start(0, 0));
        assert!(!t.is_legal_start(0, 129));
    }

    #[test]
    fn overrides_are_range_checked_and_listed() {
        let mut t = Target::default();
        assert_eq!(
            t.set("psum-banks", 9),
            Err(TargetError::BadValue { min: 1, max: 8 })
        );
        assert_eq!(t.set("bogus", 1), Err(TargetError::UnknownKey));
        t.set("max-regs", 62).unwrap();
        t.set("psum-banks", 7).unwrap();
        assert!(t.customized);
        let mut it = t.overrides();
        assert_eq!(it.next(), Some(("max-regs", 62)));
        assert_eq!(it.next(), Some(("psum-banks", 7)));
        assert_eq!(it.next(), None);
    }

    #[test]
    fn coalescing_limits_are_overridable() {
        let mut t = Target::default();
        assert_eq!(
            t.set("coalesce-count", 1),
            Err(TargetError::BadValue {
                min: 2,
                max: 1 << 20
            })
        );
        t.set("coalesce-count", 2).unwrap();
        t.set("coalesce-elements", 64).unwrap();
        assert_eq!(t.dma_coalesce_count_limit, 2);
        assert_eq!(t.dma_coalesce_max_elements, 64);
        let listed: alloc::vec::Vec<_> = t.overrides().collect();
        assert_eq!(listed, [("coalesce-count", 2), ("coalesce-elements", 64)]);
    }
}
