//! The `tusk info` report: counts, the live-interval summary and the lower
//! bounds per space.
//!
//! Liveness and bounds come from `tusk_core::analysis` (SPEC §3: program
//! order, the loop rule, remaining uses). Per space the report gives how
//! many locations are live somewhere, the longest interval, the most
//! locations live at one position, and the lower bound (the larger of the
//! stacked full-width bytes and the live area over the partitions; see
//! `tusk_core::analysis::bounds`) with the position where it is reached.

use std::fmt::Write;

use tusk_core::analysis::{Bounds, Interval, LinearOrder, MemLiveness, RegLiveness};
use tusk_core::ir::{Module, Opcode, Space, NO_LANE};

/// The most values live at one position, from their intervals.
fn peak_live(intervals: impl Iterator<Item = (Interval, u64)>, n: usize) -> u64 {
    let mut diff = vec![0i64; n + 1];
    for (iv, w) in intervals {
        let s = (iv.start as usize).min(n);
        let e = (iv.end as usize + 1).min(n);
        diff[s] += w as i64;
        diff[e] -= w as i64;
    }
    let (mut cur, mut best) = (0i64, 0i64);
    for d in &diff[..n] {
        cur += d;
        best = best.max(cur);
    }
    best.max(0) as u64
}

/// The report, one fact per line.
pub fn info_text(m: &Module) -> String {
    let mut s = String::new();
    let t = &m.target;
    let _ = write!(s, "target: {}", t.generation.name());
    for (k, v) in t.overrides() {
        let _ = write!(s, " {k}={v}");
    }
    s.push('\n');
    let max_depth = m.loops.depth.values().copied().max().unwrap_or(0);
    let _ = writeln!(s, "functions: {}", m.num_funcs());
    let _ = writeln!(s, "blocks: {}", m.num_blocks());
    let _ = writeln!(s, "loops: {} (max depth {max_depth})", m.num_loops());
    let (mut dma, mut scalar, mut compute) = (0usize, 0usize, 0usize);
    for i in m.program_order() {
        let op: Opcode = m.insts.opcode[i];
        if op.is_dma() {
            dma += 1;
        } else if op.is_scalar() {
            scalar += 1;
        } else {
            compute += 1;
        }
    }
    let _ = writeln!(
        s,
        "instructions: {} (dma {dma}, compute {compute}, scalar {scalar})",
        m.num_live_insts()
    );
    let _ = writeln!(s, "access patterns: {}", m.num_aps());
    let _ = writeln!(s, "locations: {}", m.num_mems());
    for space in Space::ALL {
        let (mut n, mut placed, mut bytes) = (0usize, 0usize, 0u64);
        for x in m.mems.space.keys() {
            if m.mems.space[x] == space {
                n += 1;
                placed += m.is_placed(x) as usize;
                bytes += m.mem_footprint(x);
            }
        }
        let _ = writeln!(
            s,
            "  {:<5} {n} ({placed} placed), {bytes} {} declared",
            space.upper(),
            unit(space)
        );
    }
    let lanes: u64 = m.regs.lanes.values().map(|&l| l as u64).sum();
    let colored = m.regs.lane.values().filter(|&&l| l != NO_LANE).count();
    let _ = writeln!(
        s,
        "registers: {} ({lanes} lanes, {colored} colored; target has {} lanes)",
        m.num_regs(),
        t.max_regs
    );

    let order = LinearOrder::of(m);
    let n = order.len();
    let live = MemLiveness::of(m, &order);
    let regs = RegLiveness::of(m, &order);
    let bounds = Bounds::of(m, &order, &live);
    let _ = writeln!(s, "live intervals ({n} positions in program order):");
    for space in Space::ALL {
        let ivs = || {
            m.mems
                .space
                .keys()
                .filter(move |&x| m.mems.space[x] == space)
                .filter_map(|x| live.interval(x))
        };
        let count = ivs().count();
        let longest = ivs().map(|iv| iv.end - iv.start + 1).max().unwrap_or(0);
        let peak = peak_live(ivs().map(|iv| (iv, 1)), n);
        let _ = writeln!(
            s,
            "  {:<5} {count} live, longest {longest} positions, at most {peak} live at once",
            space.upper()
        );
    }
    let reg_ivs = || {
        m.regs
            .lanes
            .keys()
            .filter_map(|r| regs.interval(r).map(|iv| (iv, m.regs.lanes[r] as u64)))
    };
    let _ = writeln!(
        s,
        "  {:<5} {} live, longest {} positions, at most {} lanes live at once",
        "REG",
        reg_ivs().count(),
        reg_ivs()
            .map(|(iv, _)| iv.end - iv.start + 1)
            .max()
            .unwrap_or(0),
        peak_live(reg_ivs(), n)
    );
    let _ = writeln!(s, "lower bounds (max over positions of live bytes):");
    for space in Space::ALL {
        let b = bounds.space(space);
        let _ = write!(
            s,
            "  {:<5} {} {} (full-width {}, area {})",
            space.upper(),
            b.lower_bound(),
            unit(space),
            b.full_width_bytes,
            b.area_bytes
        );
        if b.lower_bound() > 0 {
            let i = order.inst_at(b.peak_pos);
            if i.is_valid() {
                let _ = write!(s, " at position {} ({})", b.peak_pos, m.insts.opcode[i]);
            }
        }
        let cap = match space {
            Space::Sb => Some(t.sb_usable_bytes as u64),
            Space::Psum => Some(t.psum_usable_bytes() as u64),
            Space::Dram => None,
        };
        if let Some(c) = cap {
            let _ = write!(s, "; usable {c}");
        }
        s.push('\n');
    }
    let floor = tusk_core::analysis::Floor::of(m);
    let _ = writeln!(
        s,
        "floor (the most one instruction's own operands need at once; no placement uses less):"
    );
    for space in [Space::Sb, Space::Psum] {
        let f = floor.space(space);
        let _ = write!(s, "  {:<5} {} {}", space.upper(), f.bytes, unit(space));
        if f.inst.is_valid() {
            let _ = write!(s, ": {}", f.display(m));
        }
        s.push('\n');
    }
    s
}

fn unit(space: Space) -> &'static str {
    if space.is_on_chip() {
        "bytes per partition"
    } else {
        "bytes"
    }
}
