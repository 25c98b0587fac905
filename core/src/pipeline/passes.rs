//! The pass lists: which allocation passes each selection runs, in order.
//!
//! Only the passes tusk implements are listed (the reference's pipelines
//! hold 28–35 passes, most of them lowering and scheduling that happen
//! outside an allocation back end). Every list ends with the always-run
//! low-level stage: the register colorer, then a DRAM placement of the
//! register spill slots it made.

use arrayvec::ArrayVec;

use super::options::{Allocator, Options, Rotation, Selection};
use crate::ir::Space;

/// One pass of a pipeline.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Pass {
    /// `linear_scan_allocator`: PSUM then SB; loop-aware when the module
    /// has loops (the straight-line scan refuses them).
    LinearScan,
    /// `coloring_allocator_{sb,psum,dram}`.
    Coloring(Space),
    /// `exact_allocator_{sb,psum}`: the exact search as the allocator
    /// (`--allocator exact`; beyond the reference).
    Exact(Space),
    /// `dma_optimization_{psum,sb}`.
    DmaOptimization(Space),
    /// `check_in_place`: re-materializes every location at its fixed
    /// address (the verifier); optlevel 7.
    CheckInPlace,
    /// `address_rotation_psum`: successive PSUM tiles re-placed round the
    /// free banks (`--rotation psum`; not at optlevel 7, whose placements
    /// are the user's fixed assignment).
    RotationPsum,
    /// `address_rotation_sb`: SB tiles whose shared cells cost the schedule
    /// model's makespan moved to cells of their own (`--rotation all`;
    /// after the SB allocator and before the SB DMA pass, whose merged
    /// transfers alias the tiles they merge; not at optlevel 7).
    RotationSb,
    /// `coloring_allocator_reg`: the register colorer (always runs).
    ColoringReg,
    /// `coloring_allocator_dram` of the low-level stage: places the spill
    /// slots the register colorer made.
    RegSpillSlots,
}

impl Pass {
    /// The reference's pass name.
    pub const fn name(self) -> &'static str {
        match self {
            Pass::LinearScan => "linear_scan_allocator",
            Pass::Coloring(Space::Sb) => "coloring_allocator_sb",
            Pass::Coloring(Space::Psum) => "coloring_allocator_psum",
            Pass::Coloring(Space::Dram) => "coloring_allocator_dram",
            Pass::Exact(Space::Sb) => "exact_allocator_sb",
            Pass::Exact(Space::Psum) => "exact_allocator_psum",
            Pass::Exact(Space::Dram) => "exact_allocator_dram",
            Pass::DmaOptimization(Space::Psum) => "dma_optimization_psum",
            Pass::DmaOptimization(_) => "dma_optimization_sb",
            Pass::CheckInPlace => "check_in_place",
            Pass::RotationPsum => "address_rotation_psum",
            Pass::RotationSb => "address_rotation_sb",
            Pass::ColoringReg => "coloring_allocator_reg",
            Pass::RegSpillSlots => "coloring_allocator_dram(reg spill slots)",
        }
    }
}

/// Most passes in one pipeline.
pub const MAX_PASSES: usize = 12;

/// The passes a normalized option set runs.
pub fn passes(opts: &Options) -> ArrayVec<Pass, MAX_PASSES> {
    let mut p = ArrayVec::new();
    let onchip = |p: &mut ArrayVec<Pass, MAX_PASSES>, space: Space| {
        p.push(if opts.allocator == Allocator::Exact {
            Pass::Exact(space)
        } else {
            Pass::Coloring(space)
        });
    };
    match opts.selection() {
        Some(Selection::Minimal) => {
            onchip(&mut p, Space::Psum);
            onchip(&mut p, Space::Sb);
            p.push(Pass::Coloring(Space::Dram));
        }
        Some(Selection::Coloring) | None => {
            onchip(&mut p, Space::Psum);
            p.push(Pass::DmaOptimization(Space::Psum));
            onchip(&mut p, Space::Sb);
            p.push(Pass::DmaOptimization(Space::Sb));
            p.push(Pass::Coloring(Space::Dram));
        }
        Some(Selection::ColoringWithLoop) => {
            if opts.allocator == Allocator::Lsa {
                p.push(Pass::LinearScan);
            } else {
                onchip(&mut p, Space::Psum);
                onchip(&mut p, Space::Sb);
            }
            p.push(Pass::DmaOptimization(Space::Psum));
            p.push(Pass::DmaOptimization(Space::Sb));
            p.push(Pass::Coloring(Space::Dram));
        }
        Some(Selection::ColoringVerified) => {
            // The seed's reordered tail: DMA optimization on the fixed
            // addresses first, then the SB colorer for whatever is still
            // unplaced, no PSUM colorer, then the in-place check.
            p.push(Pass::DmaOptimization(Space::Psum));
            p.push(Pass::DmaOptimization(Space::Sb));
            onchip(&mut p, Space::Sb);
            p.push(Pass::Coloring(Space::Dram));
            p.push(Pass::CheckInPlace);
        }
        Some(Selection::LinearScan) => {
            p.push(Pass::LinearScan);
            p.push(Pass::DmaOptimization(Space::Psum));
            p.push(Pass::DmaOptimization(Space::Sb));
            p.push(Pass::Coloring(Space::Dram));
        }
    }
    let rotates = opts.selection() != Some(Selection::ColoringVerified);
    if rotates && opts.rotation == Rotation::All {
        // After the SB allocator, before the SB DMA pass: its merges
        // alias SB tiles by placement.
        let at = p
            .iter()
            .position(|x| *x == Pass::DmaOptimization(Space::Sb))
            .unwrap_or(p.len());
        p.insert(at, Pass::RotationSb);
    }
    if rotates && opts.rotation != Rotation::Off {
        p.push(Pass::RotationPsum);
    }
    p.push(Pass::ColoringReg);
    p.push(Pass::RegSpillSlots);
    p
}
