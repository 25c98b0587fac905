//! Structural checks of a [`CfgFunction`] before allocation: every index in
//! range, blocks contiguous and non-empty, predecessor lists that match the
//! successors, no critical edge, argument counts equal to parameter counts,
//! every vreg defined exactly once and before its uses in its own block,
//! moves with one use and one def, tied pairs in range and one-to-one.
//! (That every use is dominated by its definition across blocks is found by
//! the liveness: such a vreg is live into the entry block.)
//!
//! The errors name blocks, instructions and vregs by their indices in the
//! client's function, which are the user's names in the JSON format.
//!
//! Part of the CFG allocator (`reg/cfg/`): it allocates a client's
//! control-flow graph. The module allocator (`reg/alloc/`) is the other
//! register allocator; the two share only the colorer (`reg/chaitin_briggs.rs`) and
//! its graph (`reg/graph.rs`).

use core::fmt;

use super::function::{Block, CfgFunction, CfgInst, VReg};
use alloc::vec::Vec;

/// Largest count of blocks, instructions or vregs accepted (indices and
/// their derived positions fit a `u32` with room for two points per
/// instruction).
pub const MAX_ITEMS: usize = 1 << 28;

/// Where a vreg is defined.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum DefSite {
    /// By a def operand of this instruction.
    Inst(CfgInst),
    /// As a parameter of this block.
    Param(Block),
}

impl fmt::Display for DefSite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DefSite::Inst(i) => write!(f, "instruction {i}"),
            DefSite::Param(b) => write!(f, "a parameter of block {b}"),
        }
    }
}

/// Why a function cannot be allocated.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CfgError {
    /// The function has no block, or more items than [`MAX_ITEMS`].
    Size {
        /// What is out of range.
        what: &'static str,
        /// How many there are.
        count: u64,
    },
    /// The entry block does not exist.
    BadEntry {
        /// The entry named.
        entry: Block,
        /// Number of blocks.
        blocks: u32,
    },
    /// The entry block has predecessors or parameters.
    EntryShape {
        /// The entry block.
        entry: Block,
        /// What it has.
        what: &'static str,
    },
    /// A block's instruction range is empty, not contiguous with the
    /// previous block's, or beyond the instructions.
    BlockRange {
        /// The block.
        block: Block,
        /// Its range.
        start: u32,
        /// Its range's end.
        end: u32,
        /// Where the range had to start.
        expected_start: u32,
    },
    /// The blocks do not cover every instruction.
    Uncovered {
        /// Instructions covered.
        covered: u32,
        /// Instructions in the function.
        insts: u32,
    },
    /// A successor names a block that does not exist.
    UnknownBlock {
        /// The block naming it.
        block: Block,
        /// The successor named.
        succ: Block,
        /// Number of blocks.
        blocks: u32,
    },
    /// A block lists a successor twice.
    DuplicateSucc {
        /// The block.
        block: Block,
        /// The successor.
        succ: Block,
    },
    /// The predecessor lists do not match the successor lists.
    PredMismatch {
        /// The block whose predecessor list is wrong.
        block: Block,
    },
    /// An edge from a block with several successors to a block with
    /// several predecessors (it has no block to hold its copies).
    CriticalEdge {
        /// The edge's source.
        from: Block,
        /// The edge's target.
        to: Block,
    },
    /// An edge passes a different number of values than its target has
    /// parameters.
    ArgCount {
        /// The edge's source.
        from: Block,
        /// The edge's target.
        to: Block,
        /// Arguments passed.
        args: u32,
        /// Parameters of the target.
        params: u32,
    },
    /// An edge argument is not as wide as its parameter.
    ArgLanes {
        /// The edge's source.
        from: Block,
        /// The edge's target.
        to: Block,
        /// The argument's index.
        index: u32,
    },
    /// A vreg index is not below `num_vregs`.
    VregRange {
        /// The vreg.
        vreg: VReg,
        /// Where it appears.
        site: DefSite,
        /// Number of vregs.
        vregs: u32,
    },
    /// A vreg's lane count is neither 1 nor 2.
    Lanes {
        /// The vreg.
        vreg: VReg,
        /// Its lanes.
        lanes: u8,
    },
    /// A vreg is defined twice.
    DefinedTwice {
        /// The vreg.
        vreg: VReg,
        /// The first definition.
        first: DefSite,
        /// The second.
        second: DefSite,
    },
    /// A vreg is read but never defined.
    Undefined {
        /// The vreg.
        vreg: VReg,
        /// The block reading it.
        block: Block,
        /// The instruction reading it (`None`: an edge argument).
        inst: Option<CfgInst>,
    },
    /// A vreg is read in its defining block before (or by) its definition.
    UseBeforeDef {
        /// The vreg.
        vreg: VReg,
        /// The reading instruction.
        inst: CfgInst,
        /// Where it is defined.
        def: DefSite,
    },
    /// Some path from the entry reaches a read of a vreg without passing
    /// its definition (found by the liveness: the vreg is live into the
    /// entry block).
    NotDominated {
        /// The vreg.
        vreg: VReg,
        /// Where it is defined.
        def: DefSite,
    },
    /// A move without exactly one use and one def of equal width.
    BadMove {
        /// The instruction.
        inst: CfgInst,
    },
    /// A tied pair out of range, repeated, or joining vregs of different
    /// widths.
    BadTied {
        /// The instruction.
        inst: CfgInst,
        /// What is wrong.
        what: &'static str,
    },
}

impl fmt::Display for CfgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            CfgError::Size { what, count } => {
                write!(f, "{count} {what} is out of range (1..={MAX_ITEMS})")
            }
            CfgError::BadEntry { entry, blocks } => {
                write!(f, "entry block {entry} does not exist ({blocks} blocks)")
            }
            CfgError::EntryShape { entry, what } => {
                write!(f, "entry block {entry} has {what}; the entry has none")
            }
            CfgError::BlockRange {
                block,
                start,
                end,
                expected_start,
            } => write!(
                f,
                "block {block}: instruction range [{start}, {end}) must be non-empty and start at \
                 {expected_start} (blocks are contiguous, in layout order, each ending in its \
                 branch or exit)"
            ),
            CfgError::Uncovered { covered, insts } => write!(
                f,
                "the blocks cover instructions 0..{covered} but the function has {insts}"
            ),
            CfgError::UnknownBlock {
                block,
                succ,
                blocks,
            } => write!(
                f,
                "block {block}: successor {succ} is not a block (the function has {blocks})"
            ),
            CfgError::DuplicateSucc { block, succ } => {
                write!(f, "block {block}: successor {succ} is listed twice")
            }
            CfgError::PredMismatch { block } => write!(
                f,
                "block {block}: the predecessor list does not match the successor lists"
            ),
            CfgError::CriticalEdge { from, to } => write!(
                f,
                "critical edge from block {from} (several successors) to block {to} (several \
                 predecessors): split it with a block of its own"
            ),
            CfgError::ArgCount {
                from,
                to,
                args,
                params,
            } => write!(
                f,
                "block {from}: the edge to block {to} passes {args} values but block {to} has \
                 {params} parameters"
            ),
            CfgError::ArgLanes { from, to, index } => write!(
                f,
                "block {from}: argument {index} of the edge to block {to} is not as wide as its \
                 parameter"
            ),
            CfgError::VregRange { vreg, site, vregs } => write!(
                f,
                "{site}: vreg {vreg} is out of range (num_vregs is {vregs})"
            ),
            CfgError::Lanes { vreg, lanes } => {
                write!(f, "vreg {vreg} has {lanes} lanes; 1 or 2 are allowed")
            }
            CfgError::DefinedTwice {
                vreg,
                first,
                second,
            } => write!(
                f,
                "vreg {vreg} is defined twice: by {first} and by {second} (each vreg is defined \
                 exactly once)"
            ),
            CfgError::Undefined { vreg, block, inst } => match inst {
                Some(i) => write!(
                    f,
                    "block {block}, instruction {i}: vreg {vreg} is read but never defined"
                ),
                None => write!(
                    f,
                    "block {block}: vreg {vreg} is passed on an edge but never defined"
                ),
            },
            CfgError::UseBeforeDef { vreg, inst, def } => write!(
                f,
                "instruction {inst}: vreg {vreg} is read before its definition by {def}"
            ),
            CfgError::NotDominated { vreg, def } => write!(
                f,
                "vreg {vreg} (defined by {def}) is read on a path from the entry that does not \
                 pass its definition"
            ),
            CfgError::BadMove { inst } => write!(
                f,
                "instruction {inst}: a move needs exactly one use and one def of the same width"
            ),
            CfgError::BadTied { inst, what } => write!(f, "instruction {inst}: tied pair {what}"),
        }
    }
}

impl core::error::Error for CfgError {}

/// Reusable scratch of [`validate`] (one entry per vreg and per block).
#[derive(Clone, Debug, Default)]
pub struct Validator {
    def_site: Vec<u32>,
    in_count: Vec<u32>,
}

const NO_SITE: u32 = u32::MAX;
/// Param sites are encoded above the instruction indices.
const PARAM_SITE: u32 = 1 << 31;

fn decode(site: u32) -> DefSite {
    if site & PARAM_SITE != 0 {
        DefSite::Param(Block(site & !PARAM_SITE))
    } else {
        DefSite::Inst(CfgInst(site))
    }
}

impl Validator {
    /// Reserves for functions of `blocks` blocks and `vregs` vregs.
    pub fn reserve(&mut self, blocks: usize, vregs: usize) {
        if self.def_site.capacity() < vregs {
            self.def_site.reserve_exact(vregs - self.def_site.len());
        }
        if self.in_count.capacity() < blocks {
            self.in_count.reserve_exact(blocks - self.in_count.len());
        }
    }

    /// The definition site of `v` found by the last [`Self::validate`].
    pub fn def_site(&self, v: VReg) -> Option<DefSite> {
        match self.def_site.get(v.index()) {
            Some(&s) if s != NO_SITE => Some(decode(s)),
            _ => None,
        }
    }

    /// Checks `f` (see the module doc). Allocates only when `f` is larger
    /// than the last reserve.
    pub fn validate<F: CfgFunction + ?Sized>(&mut self, f: &F) -> Result<(), CfgError> {
        let (nb, ni, nv) = (f.num_blocks(), f.num_insts(), f.num_vregs());
        for (what, count, min) in [("blocks", nb, 1), ("instructions", ni, 1), ("vregs", nv, 0)] {
            if count < min || count > MAX_ITEMS {
                return Err(CfgError::Size {
                    what,
                    count: count as u64,
                });
            }
        }
        let entry = f.entry();
        if entry.index() >= nb {
            return Err(CfgError::BadEntry {
                entry,
                blocks: nb as u32,
            });
        }
        let mut expected = 0u32;
        for b in 0..nb {
            let block = Block(b as u32);
            let (s, e) = f.block_insts(block);
            if s != expected || e <= s || e as usize > ni {
                return Err(CfgError::BlockRange {
                    block,
                    start: s,
                    end: e,
                    expected_start: expected,
                });
            }
            expected = e;
        }
        if expected as usize != ni {
            return Err(CfgError::Uncovered {
                covered: expected,
                insts: ni as u32,
            });
        }
        self.in_count.clear();
        self.in_count.resize(nb, 0);
        for b in 0..nb {
            let block = Block(b as u32);
            let succs = f.succs(block);
            for (k, &s) in succs.iter().enumerate() {
                if s.index() >= nb {
                    return Err(CfgError::UnknownBlock {
                        block,
                        succ: s,
                        blocks: nb as u32,
                    });
                }
                if succs[..k].contains(&s) {
                    return Err(CfgError::DuplicateSucc { block, succ: s });
                }
                self.in_count[s.index()] += 1;
            }
        }
        for b in 0..nb {
            let block = Block(b as u32);
            let preds = f.preds(block);
            if preds.len() != self.in_count[b] as usize
                || preds
                    .iter()
                    .any(|&p| p.index() >= nb || !f.succs(p).contains(&block))
            {
                return Err(CfgError::PredMismatch { block });
            }
        }
        if !f.preds(entry).is_empty() {
            return Err(CfgError::EntryShape {
                entry,
                what: "predecessors",
            });
        }
        if !f.params(entry).is_empty() {
            return Err(CfgError::EntryShape {
                entry,
                what: "parameters",
            });
        }
        for b in 0..nb {
            let block = Block(b as u32);
            let succs = f.succs(block);
            for (k, &s) in succs.iter().enumerate() {
                if succs.len() > 1 && f.preds(s).len() > 1 {
                    return Err(CfgError::CriticalEdge { from: block, to: s });
                }
                let (args, params) = (f.edge_args(block, k), f.params(s));
                if args.len() != params.len() {
                    return Err(CfgError::ArgCount {
                        from: block,
                        to: s,
                        args: args.len() as u32,
                        params: params.len() as u32,
                    });
                }
                for (j, (&a, &q)) in args.iter().zip(params).enumerate() {
                    if a.index() < nv && q.index() < nv && f.lanes(a) != f.lanes(q) {
                        return Err(CfgError::ArgLanes {
                            from: block,
                            to: s,
                            index: j as u32,
                        });
                    }
                }
            }
        }
        // Definitions: each vreg once.
        self.def_site.clear();
        self.def_site.resize(nv, NO_SITE);
        let lanes_ok = |v: VReg| -> Result<(), CfgError> {
            let l = f.lanes(v);
            if l == 1 || l == 2 {
                Ok(())
            } else {
                Err(CfgError::Lanes { vreg: v, lanes: l })
            }
        };
        for b in 0..nb {
            let block = Block(b as u32);
            for &p in f.params(block) {
                self.define(p, PARAM_SITE | b as u32, nv)?;
                lanes_ok(p)?;
            }
            let (s, e) = f.block_insts(block);
            for i in s..e {
                for &d in f.defs(CfgInst(i)) {
                    self.define(d, i, nv)?;
                    lanes_ok(d)?;
                }
            }
        }
        // Reads: defined, in range, after the definition in its block.
        for b in 0..nb {
            let block = Block(b as u32);
            let (s, e) = f.block_insts(block);
            for i in s..e {
                let inst = CfgInst(i);
                for &u in f.uses(inst) {
                    let site = self.read_site(u, nv, DefSite::Inst(inst))?;
                    if site == NO_SITE {
                        return Err(CfgError::Undefined {
                            vreg: u,
                            block,
                            inst: Some(inst),
                        });
                    }
                    if site & PARAM_SITE == 0 && site >= s && site < e && site >= i {
                        return Err(CfgError::UseBeforeDef {
                            vreg: u,
                            inst,
                            def: decode(site),
                        });
                    }
                }
                self.check_inst(f, inst)?;
            }
            for k in 0..f.succs(block).len() {
                for &a in f.edge_args(block, k) {
                    let site = self.read_site(a, nv, DefSite::Param(block))?;
                    if site == NO_SITE {
                        return Err(CfgError::Undefined {
                            vreg: a,
                            block,
                            inst: None,
                        });
                    }
                }
            }
        }
        Ok(())
    }

    fn define(&mut self, v: VReg, site: u32, nv: usize) -> Result<(), CfgError> {
        let Some(slot) = self.def_site.get_mut(v.index()) else {
            return Err(CfgError::VregRange {
                vreg: v,
                site: decode(site),
                vregs: nv as u32,
            });
        };
        if *slot != NO_SITE {
            return Err(CfgError::DefinedTwice {
                vreg: v,
                first: decode(*slot),
                second: decode(site),
            });
        }
        *slot = site;
        Ok(())
    }

    fn read_site(&self, v: VReg, nv: usize, at: DefSite) -> Result<u32, CfgError> {
        self.def_site
            .get(v.index())
            .copied()
            .ok_or(CfgError::VregRange {
                vreg: v,
                site: at,
                vregs: nv as u32,
            })
    }

    fn check_inst<F: CfgFunction + ?Sized>(&self, f: &F, inst: CfgInst) -> Result<(), CfgError> {
        let (uses, defs) = (f.uses(inst), f.defs(inst));
        if f.is_move(inst)
            && (uses.len() != 1 || defs.len() != 1 || f.lanes(uses[0]) != f.lanes(defs[0]))
        {
            return Err(CfgError::BadMove { inst });
        }
        let tied = f.tied(inst);
        for (k, t) in tied.iter().enumerate() {
            let bad = |what| Err(CfgError::BadTied { inst, what });
            let (Some(&d), Some(&u)) = (defs.get(t.def as usize), uses.get(t.use_ as usize)) else {
                return bad("names an operand the instruction does not have");
            };
            if tied[..k].iter().any(|o| o.def == t.def) {
                return bad("ties one def twice");
            }
            if tied[..k].iter().any(|o| o.use_ == t.use_) {
                return bad("ties one use to two defs (defs get distinct registers)");
            }
            if tied[..k]
                .iter()
                .any(|o| uses.get(o.use_ as usize) == Some(&u))
            {
                return bad("ties two defs to one vreg (defs get distinct registers)");
            }
            if f.lanes(d) != f.lanes(u) {
                return bad("joins vregs of different widths");
            }
        }
        Ok(())
    }
}

/// Checks `f` with a fresh [`Validator`].
pub fn validate<F: CfgFunction + ?Sized>(f: &F) -> Result<(), CfgError> {
    Validator::default().validate(f)
}
