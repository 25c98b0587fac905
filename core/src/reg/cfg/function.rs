//! The client's control-flow graph, seen through counts and slices: the
//! [`CfgFunction`] trait, its index types, and [`FunctionBuf`], an owned
//! struct-of-arrays function that implements it (what the readers, the
//! generators and the tests build).
//!
//! The model: virtual registers `0..num_vregs`, each defined exactly once
//! (SSA) — by an instruction's def operand or as a block parameter. Blocks
//! hold contiguous instruction ranges in layout order. An instruction reads
//! its uses at its *early* point and writes its defs at its *late* point, so
//! a use that dies there may share a register with a def. The last
//! instruction of a block with successors is its branch; the values passed
//! to a successor's parameters are read after the branch (a parallel copy
//! on the edge). A tied pair `(d, u)` requires `defs[d]` and `uses[u]` in
//! one register (a two-address instruction); a move (one use, one def) is
//! free when both get the same register. There are no critical edges, so
//! every edge has a block of its own to hold its copies: the successor when
//! it has one predecessor, else the predecessor (which then has one
//! successor).
//!
//! Part of the CFG allocator (`reg/cfg/`): it allocates a client's
//! control-flow graph. The module allocator (`reg/alloc/`) is the other
//! register allocator; the two share only the colorer (`reg/chaitin_briggs.rs`) and
//! its graph (`reg/graph.rs`).

use alloc::vec::Vec;

/// A block of a [`CfgFunction`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[repr(transparent)]
pub struct Block(pub u32);

/// An instruction of a [`CfgFunction`] (its index in layout order).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[repr(transparent)]
pub struct CfgInst(pub u32);

/// A virtual register of a [`CfgFunction`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[repr(transparent)]
pub struct VReg(pub u32);

macro_rules! index_type {
    ($t:ident) => {
        impl $t {
            /// The index as `usize`.
            #[inline]
            pub const fn index(self) -> usize {
                self.0 as usize
            }
        }
        impl core::fmt::Display for $t {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}
index_type!(Block);
index_type!(CfgInst);
index_type!(VReg);

/// A tied pair of a two-address instruction: `defs[def]` must get the
/// register of `uses[use_]`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct TiedPair {
    /// Index into the instruction's defs.
    pub def: u16,
    /// Index into the instruction's uses.
    pub use_: u16,
}

/// A function whose registers the CFG colorer allocates. Every method is a
/// pure read of the client's storage (called many times, it must answer the
/// same way each time). Indices outside the counts are reported by
/// [`super::validate()`], never trusted.
pub trait CfgFunction {
    /// Number of blocks.
    fn num_blocks(&self) -> usize;
    /// Number of instructions.
    fn num_insts(&self) -> usize;
    /// Number of virtual registers.
    fn num_vregs(&self) -> usize;
    /// The entry block (no predecessors, no parameters).
    fn entry(&self) -> Block;
    /// Half-open instruction range `[start, end)` of `b`.
    fn block_insts(&self, b: Block) -> (u32, u32);
    /// Successors of `b`, without duplicates.
    fn succs(&self, b: Block) -> &[Block];
    /// Predecessors of `b` (each edge once).
    fn preds(&self, b: Block) -> &[Block];
    /// Parameters of `b`, defined in parallel on entry.
    fn params(&self, b: Block) -> &[VReg];
    /// The values `b` passes to the parameters of `succs(b)[succ]`.
    fn edge_args(&self, b: Block, succ: usize) -> &[VReg];
    /// Loop depth of `b` (spill code there is weighted by 10^depth).
    fn loop_depth(&self, b: Block) -> u32;
    /// Registers read by `i`.
    fn uses(&self, i: CfgInst) -> &[VReg];
    /// Registers written by `i`.
    fn defs(&self, i: CfgInst) -> &[VReg];
    /// Tied pairs of `i` (empty for most instructions).
    fn tied(&self, i: CfgInst) -> &[TiedPair];
    /// True when `i` is a copy of its one use into its one def.
    fn is_move(&self, i: CfgInst) -> bool;
    /// Lanes of `v`: 1, or 2 for a register pair (an aligned even/odd pair).
    fn lanes(&self, _v: VReg) -> u8 {
        1
    }
}

/// An owned function in struct-of-arrays columns: per block its instruction
/// range, successor / predecessor / parameter / argument ranges into shared
/// pools; per instruction its operand ranges. Build it with the `push_*`
/// methods in layout order, then [`FunctionBuf::finish`] (which derives the
/// predecessor lists).
#[derive(Clone, Debug, Default)]
pub struct FunctionBuf {
    /// Number of virtual registers.
    pub num_vregs: u32,
    /// The entry block.
    pub entry: Block,
    block_insts: Vec<(u32, u32)>,
    block_depth: Vec<u32>,
    succs: Rows<Block>,
    preds: Rows<Block>,
    params: Rows<VReg>,
    /// Per edge (in successor order) its arguments.
    args: Rows<VReg>,
    uses: Rows<VReg>,
    defs: Rows<VReg>,
    tied: Rows<TiedPair>,
    moves: Vec<bool>,
    /// Lanes per vreg; empty means every vreg is 1 lane.
    lanes: Vec<u8>,
}

impl FunctionBuf {
    /// An empty function.
    pub fn new() -> Self {
        let mut f = FunctionBuf::default();
        f.clear();
        f
    }

    /// Forgets every block and instruction, keeping the storage.
    pub fn clear(&mut self) {
        self.num_vregs = 0;
        self.entry = Block(0);
        // Per block.
        self.block_insts.clear();
        self.block_depth.clear();
        self.succs.clear();
        self.params.clear();
        self.args.clear();
        // Derived by `finish`: no rows until then.
        self.preds.start.clear();
        self.preds.pool.clear();
        // Per instruction and per vreg.
        self.uses.clear();
        self.defs.clear();
        self.tied.clear();
        self.moves.clear();
        self.lanes.clear();
    }

    /// Appends a block: its instruction range, loop depth, parameters, and
    /// per successor the successor and its arguments.
    pub fn push_block(
        &mut self,
        insts: (u32, u32),
        depth: u32,
        params: &[VReg],
        succs: &[(Block, &[VReg])],
    ) -> Block {
        let b = Block(self.block_insts.len() as u32);
        self.block_insts.push(insts);
        self.block_depth.push(depth);
        self.params.push_row(params);
        for &(s, args) in succs {
            self.succs.pool.push(s);
            self.args.push_row(args);
        }
        self.succs.end_row();
        b
    }

    /// Appends an instruction.
    pub fn push_inst(
        &mut self,
        uses: &[VReg],
        defs: &[VReg],
        tied: &[TiedPair],
        is_move: bool,
    ) -> CfgInst {
        let i = CfgInst(self.moves.len() as u32);
        self.uses.push_row(uses);
        self.defs.push_row(defs);
        self.tied.push_row(tied);
        self.moves.push(is_move);
        i
    }

    /// Sets the lanes of `v` (1 or 2); vregs never set have 1.
    pub fn set_lanes(&mut self, v: VReg, lanes: u8) {
        if self.lanes.len() <= v.index() {
            self.lanes.resize(v.index() + 1, 1);
        }
        self.lanes[v.index()] = lanes;
    }

    /// Derives the predecessor lists from the successors (successors out
    /// of range are skipped here and reported by validation).
    pub fn finish(&mut self) {
        let nb = self.block_insts.len();
        let (start, pool) = (&mut self.preds.start, &mut self.preds.pool);
        start.clear();
        start.resize(nb + 1, 0);
        for &s in &self.succs.pool {
            if s.index() < nb {
                start[s.index() + 1] += 1;
            }
        }
        for b in 0..nb {
            start[b + 1] += start[b];
        }
        pool.clear();
        pool.resize(start[nb] as usize, Block(0));
        let mut cursor: Vec<u32> = start[..nb].to_vec();
        for b in 0..nb {
            for &s in self.succs.row(b) {
                if s.index() < nb {
                    pool[cursor[s.index()] as usize] = Block(b as u32);
                    cursor[s.index()] += 1;
                }
            }
        }
    }
}

/// Trait methods that return row `x` of the [`Rows`] field of the same name.
macro_rules! rows_by_name {
    ($($name:ident($x:ident: $id:ty) -> $item:ty;)*) => {$(
        fn $name(&self, $x: $id) -> &[$item] {
            self.$name.row($x.index())
        }
    )*};
}

impl CfgFunction for FunctionBuf {
    rows_by_name! {
        succs(b: Block) -> Block;
        preds(b: Block) -> Block;
        params(b: Block) -> VReg;
        uses(i: CfgInst) -> VReg;
        defs(i: CfgInst) -> VReg;
        tied(i: CfgInst) -> TiedPair;
    }

    fn num_blocks(&self) -> usize {
        self.block_insts.len()
    }
    fn num_insts(&self) -> usize {
        self.moves.len()
    }
    fn num_vregs(&self) -> usize {
        self.num_vregs as usize
    }
    fn entry(&self) -> Block {
        self.entry
    }
    fn block_insts(&self, b: Block) -> (u32, u32) {
        self.block_insts.get(b.index()).copied().unwrap_or((0, 0))
    }
    fn edge_args(&self, b: Block, succ: usize) -> &[VReg] {
        let first = self.succs.start.get(b.index()).copied().unwrap_or(0) as usize;
        self.args.row(first + succ)
    }
    fn loop_depth(&self, b: Block) -> u32 {
        self.block_depth.get(b.index()).copied().unwrap_or(0)
    }
    fn is_move(&self, i: CfgInst) -> bool {
        self.moves.get(i.index()).copied().unwrap_or(false)
    }
    fn lanes(&self, v: VReg) -> u8 {
        self.lanes.get(v.index()).copied().unwrap_or(1)
    }
}

/// Rows of items in one pool: row `i` is `pool[start[i]..start[i + 1]]`.
/// Built row by row (`start` is `[0]` once cleared, and every row pushed
/// ends at the pool's length); a row out of range is empty.
#[derive(Clone, Debug, Default)]
struct Rows<T> {
    start: Vec<u32>,
    pool: Vec<T>,
}

impl<T: Copy> Rows<T> {
    /// No rows (the storage stays).
    fn clear(&mut self) {
        self.start.clear();
        self.start.push(0);
        self.pool.clear();
    }

    /// Ends the row of the items pushed onto the pool since the last end.
    fn end_row(&mut self) {
        self.start.push(self.pool.len() as u32);
    }

    /// Appends the row `items`.
    fn push_row(&mut self, items: &[T]) {
        self.pool.extend_from_slice(items);
        self.end_row();
    }

    /// Row `i`, empty when out of range.
    fn row(&self, i: usize) -> &[T] {
        match (self.start.get(i), self.start.get(i + 1)) {
            (Some(&a), Some(&b)) if a <= b => self.pool.get(a as usize..b as usize).unwrap_or(&[]),
            _ => &[],
        }
    }
}
