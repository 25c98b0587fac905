//! Scalar register allocation, the two allocators an embedder can call on
//! their own:
//! - the CFG allocator ([`CfgAllocator`]): virtual registers of a function
//!   with blocks, branches and block parameters (the shape regalloc2
//!   takes) to physical registers and spill slots, with moves and edits,
//!   checked by the symbolic [`CfgChecker`];
//! - the module's register colorer ([`RegAllocator`], built on the
//!   Chaitin–Briggs [`Colorer`] of an [`InterferenceGraph`]): the
//!   sequencer's scalar registers of a [`Module`](crate::Module), the pass
//!   the pipeline runs.

pub use crate::reg::cfg::validate::MAX_ITEMS;
pub use crate::reg::cfg::{
    validate, Block, CfgAllocError, CfgAllocation, CfgAllocator, CfgChecker, CfgConfig, CfgError,
    CfgFunction, CfgInst, CfgStats, CheckError, CheckErrorKind, CheckedError, DefSite, Edit,
    EditKind, EditPoint, Full, FunctionBuf, Location, TiedPair, VReg, Validator,
};
pub use crate::reg::chaitin_briggs::MAX_K;
pub use crate::reg::{
    allocate_registers, check_coloring, is_trivially_colorable, ColorChoice, ColorConfig,
    ColorError, ColorStats, Colorer, GraphError, InterferenceGraph, RegAllocConfig, RegAllocError,
    RegAllocator, RegReport, SpillChoice, NO_COLOR,
};
