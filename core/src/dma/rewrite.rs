//! The pieces the peepholes build their rewrites from: the DMAs of the
//! pass's space in linear order, a dense run as an access pattern, a DMA
//! made in the likeness of one it replaces, and the proposals a sweep hands
//! to the claim sweep ([`Proposals`]).
//!
//! Invariant: a replacement DMA keeps the engine, queue and flags of the DMA
//! it stands for (plus `SYNTHETIC`), and sits where the data moves first: a
//! load before `at`, a save after it, so that every reader still runs after
//! the bytes arrive and every writer before they leave.

use alloc::vec::Vec;
use arrayvec::ArrayVec;

use super::conflict::{sweep_claims, Claim};
use super::pass::{dma_view, reserve_err, DmaError, DmaView, DmaWorkspace, Proposal};
use crate::analysis::LinearOrder;
use crate::ir::{Ap, ApSpec, Dim, Inst, InstFlags, InstSpec, MemLoc, Module, Space, MAX_DIMS};
use crate::storage::HeapBytes;

/// The DMAs of `space` ([`dma_view`]) in `order`, with their positions.
pub(crate) fn space_dmas<'a>(
    m: &'a Module,
    order: &'a LinearOrder,
    space: Space,
) -> impl Iterator<Item = (u32, Inst, DmaView)> + 'a {
    order
        .insts()
        .iter()
        .enumerate()
        .filter_map(move |(pos, &i)| dma_view(m, i, space).map(|v| (pos as u32, i, v)))
}

/// A pattern over partitions `part_start..part_start + part_count` of `loc`
/// that reads `bytes` contiguous bytes per partition from `offset`, in
/// elements of `elem` bytes.
fn dense(
    loc: MemLoc,
    part_start: u16,
    part_count: u16,
    offset: u32,
    elem: u8,
    bytes: u64,
) -> ApSpec {
    let mut dims = ArrayVec::<Dim, MAX_DIMS>::new();
    dims.push(Dim::new(1, (bytes / elem.max(1) as u64) as u32));
    ApSpec {
        loc,
        part_start,
        part_count,
        offset,
        elem_size: elem,
        dims,
        ext: Default::default(),
    }
}

/// A dense run of `bytes` bytes at `offset` in the location and partitions
/// `like` accesses.
pub(crate) fn run_like(m: &Module, like: Ap, offset: u32, elem: u8, bytes: u64) -> ApSpec {
    dense(
        m.aps().loc[like],
        m.aps().part_start[like].into(),
        m.aps().part_count[like].into(),
        offset,
        elem,
        bytes,
    )
}

/// All of a fresh location `loc` of `parts` partitions and `bytes` bytes each.
pub(crate) fn whole(loc: MemLoc, parts: u16, elem: u8, bytes: u64) -> ApSpec {
    dense(loc, 0, parts, 0, elem, bytes)
}

/// Inserts a DMA between `dram` and `chip` in the likeness of `like` (see
/// the module doc): a load before `at`, a save after it.
pub(crate) fn insert_like(
    pass: &'static str,
    m: &mut Module,
    like: Inst,
    at: Inst,
    load: bool,
    dram: ApSpec,
    chip: ApSpec,
) -> Result<Inst, DmaError> {
    let mut spec = InstSpec::new(m.insts().opcode[like]);
    spec.engine = m.insts().engine[like];
    spec.queue = m.insts().queue[like];
    spec.flags = m.insts().flags[like] | InstFlags::SYNTHETIC;
    let (ins, outs) = if load {
        ([dram], [chip])
    } else {
        ([chip], [dram])
    };
    spec.inputs = &ins;
    spec.outputs = &outs;
    let made = if load {
        m.insert_before(at, &spec)
    } else {
        m.insert_after(at, &spec)
    };
    made.map_err(|e| reserve_err(pass, e))
}

/// The proposals of one sweep and their claims, settled together by the
/// claim sweep ([`sweep_claims`]).
///
/// Invariant: `claims[k].id` indexes `props`; `active` is the sweep's
/// scratch.
#[derive(Clone, Debug, Default)]
pub(crate) struct Proposals {
    pub(crate) props: Vec<Proposal>,
    pub(crate) claims: Vec<Claim>,
    active: Vec<u32>,
}

impl HeapBytes for Proposals {
    fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(self.props, self.claims, self.active)
    }
}

impl Proposals {
    /// Room for `n` proposals.
    pub(crate) fn with_capacity(n: usize) -> Self {
        Proposals {
            props: Vec::with_capacity(n),
            claims: Vec::with_capacity(n),
            active: Vec::with_capacity(n),
        }
    }

    /// Forgets the proposals and claims of the previous sweep.
    pub(crate) fn clear(&mut self) {
        self.props.clear();
        self.claims.clear();
    }

    /// Records a proposal and its claim (the claim's id is the proposal's).
    pub(crate) fn propose(&mut self, p: Proposal, claim: Claim) {
        let id = self.props.len() as u32;
        self.props.push(p);
        self.claims.push(Claim { id, ..claim });
    }

    /// Runs the claim sweep: afterwards [`Self::accepted`] tells which
    /// proposals may be applied together.
    pub(crate) fn settle(&mut self) {
        sweep_claims(&mut self.claims, &mut self.active);
    }

    /// How many claims there are.
    pub(crate) fn len(&self) -> usize {
        self.claims.len()
    }

    /// The proposal behind claim `k` when the claim sweep accepted it.
    pub(crate) fn accepted(&self, k: usize) -> Option<Proposal> {
        let c = self.claims.get(k)?;
        if c.ok {
            self.props.get(c.id as usize).copied()
        } else {
            None
        }
    }

    /// How many claims the claim sweep refused.
    pub(crate) fn refused(&self) -> u32 {
        self.claims.iter().filter(|c| !c.ok).count() as u32
    }
}

/// Settles the sweep's proposals ([`Proposals::settle`]) and hands each
/// accepted one, in claim order, to `apply`, which says whether it rewrote
/// (false: skipped, say for headroom). Returns how many did.
///
/// Accepted proposals are conflict-free with each other, so each is applied
/// on the program as the proposing scan saw it, in any order; `apply` gets
/// the workspace back to re-point and record what it merged.
pub(crate) fn apply_accepted(
    ws: &mut DmaWorkspace,
    mut apply: impl FnMut(&mut DmaWorkspace, Proposal) -> Result<bool, DmaError>,
) -> Result<u32, DmaError> {
    ws.proposals.settle();
    let mut made = 0;
    for k in 0..ws.proposals.len() {
        if let Some(p) = ws.proposals.accepted(k) {
            if apply(ws, p)? {
                made += 1;
            }
        }
    }
    Ok(made)
}
