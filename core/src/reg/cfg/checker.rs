//! The independent symbolic checker of a CFG allocation: it reads only the
//! client's function and the [`CfgAllocation`], never the allocator's
//! workspace, and proves that every use reads the value its vreg holds,
//! along every path from the entry.
//!
//! The abstract state maps each location (register lane, slot lane) to the
//! value it holds: a value is the vreg that computed it, a move's def
//! holding its source's value (so coalesced copies share one). Transfer
//! through a block: before-edits, the instruction (its uses are checked,
//! then its defs write their lanes), after-edits; on each edge, the edge's
//! edits, then the parameters are bound in parallel: a parameter's location
//! holds the parameter's value only if it held the argument's value after
//! the edits (else it holds nothing usable). At a join the states meet:
//! a location keeps a value only when every predecessor agrees. The
//! iteration runs to the fixpoint in reverse post-order; an error found at
//! any iteration is real (states only lose values as it goes on).
//!
//! Also checked: every operand is in a register inside `0..K`, pairs on an
//! even lane, the defs of an instruction on disjoint lanes, tied defs on
//! their use's register, edit locations inside the register file and the
//! slot area, and edits in program order.
//!
//! Part of the CFG allocator (`reg/cfg/`): it allocates a client's
//! control-flow graph. The module allocator (`reg/alloc/`) is the other
//! register allocator; the two share only the colorer (`reg/chaitin_briggs.rs`) and
//! its graph (`reg/graph.rs`).

use alloc::vec::Vec;
use core::fmt;

use super::function::{Block, CfgFunction, CfgInst, VReg};
use super::output::{CfgAllocation, EditPoint, Location};

const NO_VALUE: u32 = u32::MAX;

/// What the checker found wrong.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CheckErrorKind {
    /// A use reads a location that does not hold its vreg's value on some
    /// path (`found`: the vreg whose value is there, if any).
    WrongValue {
        /// Operand index among the uses.
        operand: u16,
        /// The vreg read.
        vreg: VReg,
        /// Where it is read.
        location: Location,
        /// The value found there.
        found: Option<VReg>,
    },
    /// An operand is not in a register of the file (or a pair is on an odd
    /// lane).
    NotARegister {
        /// Operand index (uses, then defs).
        operand: u16,
        /// Its location.
        location: Location,
    },
    /// Two defs of one instruction share a lane.
    DefsOverlap {
        /// The location.
        location: Location,
    },
    /// A tied def is not on its use's register.
    Tied {
        /// Def index.
        def: u16,
        /// Use index.
        use_: u16,
    },
    /// An edit names a location outside the file or the slot area, or
    /// lies outside the function.
    BadEdit {
        /// Index of the edit.
        edit: u32,
    },
    /// Edits are not in program order.
    EditOrder {
        /// Index of the first edit out of order.
        edit: u32,
    },
    /// The allocation does not have the function's shape (operand or
    /// parameter counts).
    Shape,
}

/// A checker finding, with where it is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CheckError {
    /// The block.
    pub block: Block,
    /// The instruction, when the finding is at one.
    pub inst: Option<CfgInst>,
    /// What is wrong.
    pub kind: CheckErrorKind,
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "block {}", self.block)?;
        if let Some(i) = self.inst {
            write!(f, ", instruction {i}")?;
        }
        f.write_str(": ")?;
        match self.kind {
            CheckErrorKind::WrongValue {
                operand,
                vreg,
                location,
                found,
            } => {
                write!(
                    f,
                    "use {operand} reads vreg {vreg} from {location}, which holds "
                )?;
                match found {
                    Some(v) => write!(f, "the value of vreg {v} on some path"),
                    None => f.write_str("no value of it on some path"),
                }
            }
            CheckErrorKind::NotARegister { operand, location } => write!(
                f,
                "operand {operand} is at {location}, not a register of the file (pairs on an \
                 even lane)"
            ),
            CheckErrorKind::DefsOverlap { location } => {
                write!(f, "two defs share {location}")
            }
            CheckErrorKind::Tied { def, use_ } => {
                write!(f, "tied def {def} is not on the register of use {use_}")
            }
            CheckErrorKind::BadEdit { edit } => {
                write!(
                    f,
                    "edit {edit} names a location or point outside the function"
                )
            }
            CheckErrorKind::EditOrder { edit } => write!(f, "edit {edit} is out of program order"),
            CheckErrorKind::Shape => {
                f.write_str("the allocation's operand or parameter counts differ from the function")
            }
        }
    }
}

impl core::error::Error for CheckError {}

/// The checker's reusable workspace.
#[derive(Clone, Debug, Default)]
pub struct CfgChecker {
    val: Vec<u32>,
    state_in: Vec<u32>,
    has_in: Vec<bool>,
    cur: Vec<u32>,
    edge: Vec<u32>,
    bind: Vec<bool>,
    rpo: Vec<u32>,
    rpo_index: Vec<u32>,
    stack: Vec<(u32, u32)>,
    seen: Vec<bool>,
    dirty: Vec<bool>,
    /// Per point key, the first edit at or after it.
    edit_at: Vec<u32>,
}

/// The position key of an edit point (program order), or `None` when the
/// point is outside `f`.
fn key<F: CfgFunction + ?Sized>(f: &F, p: EditPoint) -> Option<u64> {
    match p {
        EditPoint::Before(i) if i.index() < f.num_insts() => Some(3 * i.0 as u64),
        EditPoint::After(i) if i.index() < f.num_insts() => Some(3 * i.0 as u64 + 1),
        EditPoint::Edge { from, succ }
            if from.index() < f.num_blocks() && (succ as usize) < f.succs(from).len() =>
        {
            let (_, e) = f.block_insts(from);
            Some(3 * (e as u64).saturating_sub(1) + 2)
        }
        _ => None,
    }
}

impl CfgChecker {
    /// A new checker.
    pub fn new() -> Self {
        CfgChecker::default()
    }

    /// Checks `a` against `f` (validated beforehand). Allocates only to
    /// grow its tables past their last size.
    pub fn check<F: CfgFunction + ?Sized>(
        &mut self,
        f: &F,
        a: &CfgAllocation,
    ) -> Result<(), CheckError> {
        let (nb, ni, nv) = (f.num_blocks(), f.num_insts(), f.num_vregs());
        let k = a.k as u32;
        let width = k as usize + a.slot_lanes as usize;
        let entry = f.entry();
        let shape = CheckError {
            block: entry,
            inst: None,
            kind: CheckErrorKind::Shape,
        };
        if a.op_start.len() != ni + 1 || a.n_use.len() != ni || a.param_start.len() != nb + 1 {
            return Err(shape);
        }
        for i in 0..ni {
            let inst = CfgInst(i as u32);
            let (s, e) = (a.op_start[i] as usize, a.op_start[i + 1] as usize);
            if e < s
                || e > a.op_locs.len()
                || a.n_use[i] as usize != f.uses(inst).len()
                || e - s != f.uses(inst).len() + f.defs(inst).len()
            {
                return Err(shape);
            }
        }
        for b in 0..nb {
            let (s, e) = (a.param_start[b] as usize, a.param_start[b + 1] as usize);
            if e < s || e > a.param_locs.len() || e - s != f.params(Block(b as u32)).len() {
                return Err(shape);
            }
        }
        // Edits: in range and in program order; index them by point key.
        let nkeys = 3 * ni + 1;
        self.edit_at.clear();
        self.edit_at.resize(nkeys + 1, 0);
        let mut last = (0u64, 0u32);
        for (n, ed) in a.edits.iter().enumerate() {
            let block_of_edit = match ed.point {
                EditPoint::Edge { from, .. } => from,
                _ => entry,
            };
            let bad = CheckError {
                block: block_of_edit,
                inst: None,
                kind: CheckErrorKind::BadEdit { edit: n as u32 },
            };
            let Some(kk) = key(f, ed.point) else {
                return Err(bad);
            };
            let in_range = |l: Location| match (l.as_reg(), l.as_slot()) {
                (Some(r), _) => r + ed.lanes as u32 <= k,
                (_, Some(s)) => s + ed.lanes as u32 <= a.slot_lanes,
                _ => false,
            };
            if ed.lanes == 0 || ed.lanes > 2 || !in_range(ed.from) || !in_range(ed.to) {
                return Err(bad);
            }
            let sub = match ed.point {
                EditPoint::Edge { succ, .. } => succ,
                _ => 0,
            };
            if (kk, sub) < last {
                return Err(CheckError {
                    block: block_of_edit,
                    inst: None,
                    kind: CheckErrorKind::EditOrder { edit: n as u32 },
                });
            }
            last = (kk, sub);
            self.edit_at[kk as usize + 1] = n as u32 + 1;
        }
        // edit_at[key] = first edit with key ≥ key: a running maximum.
        for x in 1..=nkeys {
            self.edit_at[x] = self.edit_at[x].max(self.edit_at[x - 1]);
        }
        self.order(f);
        // Values: a move's def holds its source's value (defs dominate uses,
        // so the reverse post-order meets every source before its copy).
        self.val.clear();
        self.val.extend(0..nv as u32);
        for &b in &self.rpo {
            let (s, e) = f.block_insts(Block(b));
            for i in s..e {
                let inst = CfgInst(i);
                if f.is_move(inst) {
                    let (u, d) = (f.uses(inst)[0], f.defs(inst)[0]);
                    self.val[d.index()] = self.val[u.index()];
                }
            }
        }
        self.state_in.clear();
        self.state_in.resize(nb * width, NO_VALUE);
        self.has_in.clear();
        self.has_in.resize(nb, false);
        self.dirty.clear();
        self.dirty.resize(nb, false);
        self.cur.clear();
        self.cur.resize(width, NO_VALUE);
        self.edge.clear();
        self.edge.resize(width, NO_VALUE);
        self.has_in[entry.index()] = true;
        self.dirty[entry.index()] = true;
        loop {
            let mut any = false;
            for r in 0..self.rpo.len() {
                let b = self.rpo[r] as usize;
                if !self.dirty[b] {
                    continue;
                }
                self.dirty[b] = false;
                any = true;
                self.block(f, a, b, width)?;
            }
            if !any {
                break;
            }
        }
        Ok(())
    }

    /// Reverse post-order of the blocks reachable from the entry.
    fn order<F: CfgFunction + ?Sized>(&mut self, f: &F) {
        let nb = f.num_blocks();
        self.rpo.clear();
        self.seen.clear();
        self.seen.resize(nb, false);
        self.stack.clear();
        let e = f.entry().0;
        self.stack.push((e, 0));
        self.seen[e as usize] = true;
        // Each stack entry is a block and how many of its successors were
        // tried; a block is finished (post-order) when none is left.
        while let Some(&mut (b, ref mut tried)) = self.stack.last_mut() {
            match f.succs(Block(b)).get(*tried as usize) {
                Some(&Block(s)) => {
                    *tried += 1;
                    if !core::mem::replace(&mut self.seen[s as usize], true) {
                        self.stack.push((s, 0));
                    }
                }
                None => {
                    self.rpo.push(b);
                    self.stack.pop();
                }
            }
        }
        self.rpo.reverse();
        self.rpo_index.clear();
        self.rpo_index.resize(nb, u32::MAX);
        for (n, &b) in self.rpo.iter().enumerate() {
            self.rpo_index[b as usize] = n as u32;
        }
    }

    fn apply(state: &mut [u32], a: &CfgAllocation, lo: usize, hi: usize, k: u32) {
        for ed in &a.edits[lo..hi] {
            let index = |l: Location| match (l.as_reg(), l.as_slot()) {
                (Some(r), _) => r as usize,
                (_, Some(s)) => (k + s) as usize,
                _ => 0,
            };
            let (f, t) = (index(ed.from), index(ed.to));
            let n = ed.lanes as usize;
            let mut v = [NO_VALUE; 2];
            v[..n].copy_from_slice(&state[f..f + n]);
            state[t..t + n].copy_from_slice(&v[..n]);
        }
    }

    fn block<F: CfgFunction + ?Sized>(
        &mut self,
        f: &F,
        a: &CfgAllocation,
        b: usize,
        width: usize,
    ) -> Result<(), CheckError> {
        let k = a.k as u32;
        let block = Block(b as u32);
        self.cur
            .copy_from_slice(&self.state_in[b * width..(b + 1) * width]);
        let (s, e) = f.block_insts(block);
        for i in s..e {
            let inst = CfgInst(i);
            let at = |kind| CheckError {
                block,
                inst: Some(inst),
                kind,
            };
            let kb = 3 * i as usize;
            Self::apply(
                &mut self.cur,
                a,
                self.edit_at[kb] as usize,
                self.edit_at[kb + 1] as usize,
                k,
            );
            let locs = a.operand_locations(inst);
            let (uses, defs) = (f.uses(inst), f.defs(inst));
            let reg_of = |n: usize, v: VReg| -> Result<u32, CheckError> {
                let l = locs[n];
                let lanes = f.lanes(v) as u32;
                match l.as_reg() {
                    Some(r) if r + lanes <= k && (lanes == 1 || r % 2 == 0) => Ok(r),
                    _ => Err(at(CheckErrorKind::NotARegister {
                        operand: n as u16,
                        location: l,
                    })),
                }
            };
            for (j, &u) in uses.iter().enumerate() {
                let r = reg_of(j, u)?;
                let want = self.val[u.index()];
                for l in 0..f.lanes(u) as u32 {
                    let have = self.cur[(r + l) as usize];
                    if have != want {
                        return Err(at(CheckErrorKind::WrongValue {
                            operand: j as u16,
                            vreg: u,
                            location: locs[j],
                            found: (have != NO_VALUE).then_some(VReg(have)),
                        }));
                    }
                }
            }
            let nu = uses.len();
            for (j, &d) in defs.iter().enumerate() {
                let r = reg_of(nu + j, d)?;
                let ld = f.lanes(d) as u32;
                for (j2, &d2) in defs[..j].iter().enumerate() {
                    let r2 = reg_of(nu + j2, d2)?;
                    if r < r2 + f.lanes(d2) as u32 && r2 < r + ld {
                        return Err(at(CheckErrorKind::DefsOverlap {
                            location: locs[nu + j],
                        }));
                    }
                }
            }
            for t in f.tied(inst) {
                if locs[nu + t.def as usize] != locs[t.use_ as usize] {
                    return Err(at(CheckErrorKind::Tied {
                        def: t.def,
                        use_: t.use_,
                    }));
                }
            }
            for (j, &d) in defs.iter().enumerate() {
                let r = reg_of(nu + j, d)?;
                for l in 0..f.lanes(d) as u32 {
                    self.cur[(r + l) as usize] = self.val[d.index()];
                }
            }
            Self::apply(
                &mut self.cur,
                a,
                self.edit_at[kb + 1] as usize,
                self.edit_at[kb + 2] as usize,
                k,
            );
        }
        let kb = 3 * (e as usize - 1) + 2;
        let (lo, hi) = (self.edit_at[kb] as usize, self.edit_at[kb + 1] as usize);
        for (n, &sb) in f.succs(block).iter().enumerate() {
            self.edge.copy_from_slice(&self.cur);
            // This edge's edits: the ones at the block's edge key with its
            // successor index.
            let mut x = lo;
            while x < hi {
                let y = x + 1;
                if let EditPoint::Edge { succ, .. } = a.edits[x].point {
                    if succ as usize == n {
                        Self::apply(&mut self.edge, a, x, y, k);
                    }
                }
                x = y;
            }
            let args = f.edge_args(block, n);
            let params = f.params(sb);
            let ps = a.param_start[sb.index()] as usize;
            self.bind.clear();
            for (j, (&arg, &q)) in args.iter().zip(params).enumerate() {
                let l = a.param_locs[ps + j];
                let ok = self.lanes_hold(l, f.lanes(q) as u32, k, width, self.val[arg.index()]);
                self.bind.push(ok);
            }
            for (j, &q) in params.iter().enumerate() {
                let l = a.param_locs[ps + j];
                let base = match (l.as_reg(), l.as_slot()) {
                    (Some(r), _) => r as usize,
                    (_, Some(s)) => (k + s) as usize,
                    _ => width,
                };
                let lanes = f.lanes(q) as usize;
                if base + lanes > width {
                    return Err(CheckError {
                        block: sb,
                        inst: None,
                        kind: CheckErrorKind::NotARegister {
                            operand: j as u16,
                            location: l,
                        },
                    });
                }
                let v = if self.bind[j] {
                    self.val[q.index()]
                } else {
                    NO_VALUE
                };
                for x in base..base + lanes {
                    self.edge[x] = v;
                }
            }
            let s = sb.index();
            let row = &mut self.state_in[s * width..(s + 1) * width];
            let mut changed = false;
            if !self.has_in[s] {
                row.copy_from_slice(&self.edge);
                self.has_in[s] = true;
                changed = true;
            } else {
                for (x, &y) in row.iter_mut().zip(self.edge.iter()) {
                    if *x != y && *x != NO_VALUE {
                        *x = NO_VALUE;
                        changed = true;
                    }
                }
            }
            if changed {
                self.dirty[s] = true;
            }
        }
        Ok(())
    }

    fn lanes_hold(&self, l: Location, lanes: u32, k: u32, width: usize, want: u32) -> bool {
        let base = match (l.as_reg(), l.as_slot()) {
            (Some(r), _) => r as usize,
            (_, Some(s)) => (k + s) as usize,
            _ => return false,
        };
        base + lanes as usize <= width && (0..lanes as usize).all(|x| self.edge[base + x] == want)
    }
}
