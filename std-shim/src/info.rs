//! The `tusk info` report: counts, the live-interval summary and the lower
//! bounds per space.
//!
//! Liveness and bounds come from `tusk_core::analysis` (docs/SEMANTICS.md §1: program
//! order, the loop rule, remaining uses). Per space the report gives how
//! many locations are live somewhere, the longest interval, the most
//! locations live at one position, and the lower bound (the larger of the
//! stacked full-width bytes and the live area over the partitions; see
//! `tusk_core::analysis`) with the position where it is reached.

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

/// Per space: declared, placed and live locations, and the bound.
#[derive(Clone, Debug)]
struct SpaceFacts {
    space: Space,
    declared: usize,
    placed: usize,
    declared_bytes: u64,
    live: usize,
    longest: u32,
    most_live: u64,
    lower_bound: u64,
    full_width: u64,
    area: u64,
    /// Where the bound is reached: position and opcode.
    at: Option<(u32, Opcode)>,
    usable: Option<u64>,
}

/// Everything `tusk info` reports, computed once for both renderings.
#[derive(Clone, Debug)]
struct Facts {
    target: String,
    functions: usize,
    blocks: usize,
    loops: usize,
    max_depth: u32,
    instructions: usize,
    dma: usize,
    compute: usize,
    scalar: usize,
    access_patterns: usize,
    locations: usize,
    registers: usize,
    lanes: u64,
    colored: usize,
    target_lanes: u64,
    positions: usize,
    reg_live: usize,
    reg_longest: u32,
    reg_most_lanes: u64,
    spaces: Vec<SpaceFacts>,
}

fn facts(m: &Module) -> Facts {
    let t = &m.target;
    let mut target = t.generation.name().to_string();
    for (k, v) in t.overrides() {
        let _ = write!(target, " {k}={v}");
    }
    let (mut dma, mut scalar, mut compute) = (0usize, 0usize, 0usize);
    for i in m.program_order() {
        let op: Opcode = m.insts().opcode[i];
        if op.is_dma() {
            dma += 1;
        } else if op.is_scalar() {
            scalar += 1;
        } else {
            compute += 1;
        }
    }
    let order = LinearOrder::of(m);
    let n = order.len();
    let live = MemLiveness::of(m, &order);
    let regs = RegLiveness::of(m, &order);
    let bounds = Bounds::of(m, &order, &live);
    let spaces = Space::ALL
        .iter()
        .map(|&space| {
            let (mut declared, mut placed, mut declared_bytes) = (0usize, 0usize, 0u64);
            for x in m.mems().space.keys() {
                if m.mems().space[x] == space {
                    declared += 1;
                    placed += m.is_placed(x) as usize;
                    declared_bytes += m.mem_footprint(x);
                }
            }
            let ivs = || {
                m.mems()
                    .space
                    .keys()
                    .filter(move |&x| m.mems().space[x] == space)
                    .filter_map(|x| live.interval(x))
            };
            let b = bounds.space(space);
            let at = (b.lower_bound() > 0)
                .then(|| order.inst_at(b.peak_pos))
                .filter(|i| i.is_valid())
                .map(|i| (b.peak_pos, m.insts().opcode[i]));
            SpaceFacts {
                space,
                declared,
                placed,
                declared_bytes,
                live: ivs().count(),
                longest: ivs().map(|iv| iv.end - iv.start + 1).max().unwrap_or(0),
                most_live: peak_live(ivs().map(|iv| (iv, 1)), n),
                lower_bound: b.lower_bound(),
                full_width: b.full_width_bytes,
                area: b.area_bytes,
                at,
                usable: match space {
                    Space::Sb => Some(t.sb_usable_bytes as u64),
                    Space::Psum => Some(t.psum_usable_bytes() as u64),
                    Space::Dram => None,
                },
            }
        })
        .collect();
    let reg_ivs = || {
        m.regs()
            .lanes
            .keys()
            .filter_map(|r| regs.interval(r).map(|iv| (iv, m.regs().lanes[r] as u64)))
    };
    Facts {
        target,
        functions: m.num_funcs(),
        blocks: m.num_blocks(),
        loops: m.num_loops(),
        max_depth: m.loops().depth.values().copied().max().unwrap_or(0) as u32,
        instructions: m.num_live_insts(),
        dma,
        compute,
        scalar,
        access_patterns: m.num_aps(),
        locations: m.num_mems(),
        registers: m.num_regs(),
        lanes: m.regs().lanes.values().map(|&l| l as u64).sum(),
        colored: m.regs().lane.values().filter(|&&l| l != NO_LANE).count(),
        target_lanes: t.max_regs as u64,
        positions: n,
        reg_live: reg_ivs().count(),
        reg_longest: reg_ivs()
            .map(|(iv, _)| iv.end - iv.start + 1)
            .max()
            .unwrap_or(0),
        reg_most_lanes: peak_live(reg_ivs(), n),
        spaces,
    }
}

/// The report, one fact per line.
pub fn info_text(m: &Module) -> String {
    let f = facts(m);
    let mut s = String::new();
    let _ = writeln!(s, "target: {}", f.target);
    let _ = writeln!(s, "functions: {}", f.functions);
    let _ = writeln!(s, "blocks: {}", f.blocks);
    let _ = writeln!(s, "loops: {} (max depth {})", f.loops, f.max_depth);
    let _ = writeln!(
        s,
        "instructions: {} (dma {}, compute {}, scalar {})",
        f.instructions, f.dma, f.compute, f.scalar
    );
    let _ = writeln!(s, "access patterns: {}", f.access_patterns);
    let _ = writeln!(s, "locations: {}", f.locations);
    for x in &f.spaces {
        let _ = writeln!(
            s,
            "  {:<5} {} ({} placed), {} {} declared",
            x.space.upper(),
            x.declared,
            x.placed,
            x.declared_bytes,
            unit(x.space)
        );
    }
    let _ = writeln!(
        s,
        "registers: {} ({} lanes, {} colored; target has {} lanes)",
        f.registers, f.lanes, f.colored, f.target_lanes
    );
    let _ = writeln!(
        s,
        "live intervals ({} positions in program order):",
        f.positions
    );
    for x in &f.spaces {
        let _ = writeln!(
            s,
            "  {:<5} {} live, longest {} positions, at most {} live at once",
            x.space.upper(),
            x.live,
            x.longest,
            x.most_live
        );
    }
    let _ = writeln!(
        s,
        "  {:<5} {} live, longest {} positions, at most {} lanes live at once",
        "REG", f.reg_live, f.reg_longest, f.reg_most_lanes
    );
    let _ = writeln!(s, "lower bounds (max over positions of live bytes):");
    for x in &f.spaces {
        let _ = write!(
            s,
            "  {:<5} {} {} (full-width {}, area {})",
            x.space.upper(),
            x.lower_bound,
            unit(x.space),
            x.full_width,
            x.area
        );
        if let Some((pos, op)) = x.at {
            let _ = write!(s, " at position {pos} ({op})");
        }
        if let Some(c) = x.usable {
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

/// The same facts as one JSON object (`tusk info --json`).
pub fn info_json(m: &Module) -> serde_json::Value {
    use serde_json::json;
    let f = facts(m);
    json!({
        "target": f.target,
        "functions": f.functions,
        "blocks": f.blocks,
        "loops": f.loops,
        "max_loop_depth": f.max_depth,
        "instructions": {"total": f.instructions, "dma": f.dma, "compute": f.compute, "scalar": f.scalar},
        "access_patterns": f.access_patterns,
        "locations": f.locations,
        "registers": {
            "count": f.registers,
            "lanes": f.lanes,
            "colored": f.colored,
            "target_lanes": f.target_lanes,
            "live": f.reg_live,
            "longest_interval": f.reg_longest,
            "most_lanes_live": f.reg_most_lanes,
        },
        "positions": f.positions,
        "spaces": f.spaces.iter().map(|x| json!({
            "space": x.space.upper(),
            "declared": x.declared,
            "placed": x.placed,
            "declared_bytes": x.declared_bytes,
            "live": x.live,
            "longest_interval": x.longest,
            "most_live": x.most_live,
            "lower_bound": x.lower_bound,
            "full_width_bytes": x.full_width,
            "area_bytes": x.area,
            "lower_bound_position": x.at.map(|a| a.0),
            "lower_bound_opcode": x.at.map(|a| a.1.to_string()),
            "usable": x.usable,
        })).collect::<Vec<_>>(),
    })
}

fn unit(space: Space) -> &'static str {
    if space.is_on_chip() {
        "bytes per partition"
    } else {
        "bytes"
    }
}
