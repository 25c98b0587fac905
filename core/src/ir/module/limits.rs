//! The bounds the module enforces on any input: the hostile-input limits
//! of [`Limits`] and the sizes the packed columns can represent.

/// Most partitions of any location, so that an access pattern's partition
/// range fits the `u8` columns (on-chip spaces have 128; DRAM tensors are
/// shaped like the on-chip tiles they feed).
pub const MAX_AP_PARTITIONS: u16 = u8::MAX as u16;

/// Most entries of the multi-dimension dim pool: a multi-dimension access
/// pattern's slot packs `start << 3 | ndims` into 32 bits.
pub(super) const MAX_DIM_POOL: usize = (u32::MAX >> 3) as usize;

/// Limits the module enforces on any input (hostile-input guards).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Limits {
    /// Most instructions in one module.
    pub instructions: u32,
    /// Most memory locations.
    pub locations: u32,
    /// Most registers.
    pub registers: u32,
    /// Deepest loop nesting.
    pub loop_depth: u16,
    /// Most inputs + outputs of one instruction.
    pub aps_per_inst: u8,
    /// Most uses + defs of one instruction.
    pub regs_per_inst: u8,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            instructions: 16_000_000,
            locations: 8_000_000,
            registers: 4_000_000,
            loop_depth: 64,
            aps_per_inst: 16,
            regs_per_inst: 16,
        }
    }
}
