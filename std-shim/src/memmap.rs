//! The memory map of a module as a [`Chart`]: per space, one rectangle per
//! placed location over its live interval (program order) and byte range.
//!
//! - SB: one panel for all partitions; when some placed tensor covers only
//!   part of the partitions, one panel per start-partition group
//!   (`start_rules[0].granularity` partitions, the quadrants) and each
//!   tensor drawn in every group it covers, dashed when partial there.
//! - PSUM: one panel, with a line per bank.
//! - DRAM: the locations an allocator placed (spill slots, internal
//!   scratch), when there are any; external inputs and outputs are the
//!   runtime's.
//!
//! Spill slots and reload copies have their own colours; spill and reload
//! instructions are ticks under every panel. The peak of a space is the
//! position, inside the live interval of the tensor with the highest top,
//! where the most bytes are live; its live set is outlined. For a failed
//! run, the failing space marks the failure position instead and stacks
//! the demand there: the unplaced locations live at that position, the
//! failing one in red, on top of what is placed.

use tusk_core::analysis::{LinearOrder, MemLiveness};
use tusk_core::ir::{InstFlags, MemFlags, MemLoc, Module, Space};
use tusk_core::report::FailureSite;

use crate::svg::{bytes_label, keep_largest, Chart, Item, Kind, Marker, MarkerKind, Panel};

/// Rectangles drawn per panel at most: beyond it the largest are kept (a
/// picture of more is unreadable and its file unwieldy).
pub const MAX_ITEMS: usize = 20_000;

/// The memory map of `m` (placed as it is: after a run, or at a failure).
pub fn memory_map(m: &Module, title: &str, subtitle: &str, failure: Option<&FailureSite>) -> Chart {
    memory_map_window(m, title, subtitle, failure, None)
}

/// [`memory_map`] over positions `[lo, hi)` of program order only
/// (`--svg-window`): rectangles clipped to it, the peak the window's, the
/// failure marked when it lies inside. A big module's map stays readable
/// and small, and a failure at position 110 of 3000 can be looked at.
pub fn memory_map_window(
    m: &Module,
    title: &str,
    subtitle: &str,
    failure: Option<&FailureSite>,
    window: Option<(u64, u64)>,
) -> Chart {
    let order = LinearOrder::of(m);
    let live = MemLiveness::of(m, &order);
    let n = order.len() as u64;
    let (w0, w1) = match window {
        Some((lo, hi)) => (lo.min(n), hi.min(n).max(lo.min(n) + 1)),
        None => (0, n.max(1)),
    };
    let in_window = |p: u64| (w0..w1).contains(&p);
    let clip = |it: &mut Item| -> bool {
        if it.upper <= w0 || it.lower >= w1 {
            return false;
        }
        it.lower = it.lower.max(w0);
        it.upper = it.upper.min(w1);
        true
    };
    let fail_pos = failure.and_then(|f| {
        f.position
            .or_else(|| f.inst.map(|i| order.pos(i)))
            .filter(|&p| (p as u64) < n && in_window(p as u64))
    });
    let fail_space = failure.and_then(|f| f.space.or_else(|| f.tensor.map(|t| m.mems().space[t])));
    let mut panels = Vec::new();
    let mut dropped = 0usize;
    let ticks: Vec<Marker> = order
        .insts()
        .iter()
        .enumerate()
        .filter_map(|(p, &i)| {
            let f = m.insts().flags[i];
            let kind = if f.contains(InstFlags::SPILL) {
                MarkerKind::SpillInst
            } else if f.contains(InstFlags::RELOAD) {
                MarkerKind::ReloadInst
            } else {
                return None;
            };
            Some(Marker {
                pos: p as u64,
                kind,
                label: String::new(),
                at: String::new(),
            })
        })
        .collect();
    // The instruction at a position, as messages name it.
    let inst_at = |p: u64| {
        u32::try_from(p)
            .ok()
            .filter(|&p| (p as usize) < order.len())
            .map(|p| m.describe_inst(order.inst_at(p)).to_string())
            .unwrap_or_default()
    };
    let t = &m.target;
    for space in [Space::Sb, Space::Psum, Space::Dram] {
        // (location, item) of the placed locations of this space.
        let mut placed: Vec<(MemLoc, Item)> = Vec::new();
        for v in m.mems().space.keys() {
            if m.mems().space[v] != space || !m.is_placed(v) {
                continue;
            }
            let Some(iv) = live.interval(v) else { continue };
            let kind = kind_of(m, v);
            placed.push((
                v,
                Item {
                    lower: iv.start as u64,
                    upper: iv.end as u64 + 1,
                    offset: m.mems().offset[v],
                    size: m.mem_footprint(v),
                    label: m.mem_name(v).to_string(),
                    detail: format!("{} live [{}, {}]", m.describe_mem(v), iv.start, iv.end),
                    kind,
                    highlight: false,
                    partial: false,
                },
            ));
        }
        placed.retain_mut(|(_, it)| clip(it));
        let failing_here = fail_space == Some(space);
        if placed.is_empty() && !failing_here {
            continue;
        }
        // The highlighted position.
        let (at, marker) = if failing_here {
            match fail_pos {
                Some(p) => {
                    let who = failure
                        .and_then(|f| f.tensor)
                        .map(|t| format!("%{} ", m.mem_name(t)))
                        .unwrap_or_default();
                    (
                        Some(p as u64),
                        Some(Marker {
                            pos: p as u64,
                            kind: MarkerKind::Failure,
                            label: format!("{who}does not fit at {p}"),
                            at: inst_at(p as u64),
                        }),
                    )
                }
                None => (None, None),
            }
        } else {
            match peak_position(n as usize, placed.iter().map(|x| &x.1)) {
                Some((p, top)) => (
                    Some(p),
                    Some(Marker {
                        pos: p,
                        kind: MarkerKind::Peak,
                        at: inst_at(p),
                        // PSUM counts whole banks, as the run summary and
                        // the subtitle do: a tensor owns the banks it
                        // touches.
                        label: if space == Space::Psum {
                            let bank = t.psum_bank_bytes.max(1) as u64;
                            let banks = top.div_ceil(bank);
                            format!(
                                "peak {} ({banks} bank{}) at {p}",
                                bytes_label(banks * bank),
                                if banks == 1 { "" } else { "s" }
                            )
                        } else {
                            format!("peak {} at {p}", bytes_label(top))
                        },
                    }),
                ),
                None => (None, None),
            }
        };
        if let Some(p) = at {
            for (_, it) in placed.iter_mut() {
                it.highlight = it.lower <= p && p < it.upper;
            }
        }
        // The demand at the failure: unplaced locations live there, stacked
        // above the highest placed top live there, the failing one first.
        let mut demand: Vec<(MemLoc, Item)> = Vec::new();
        if let (true, Some(p)) = (failing_here, fail_pos) {
            let mut base = placed
                .iter()
                .filter(|(_, it)| it.lower <= p as u64 && (p as u64) < it.upper)
                .map(|(_, it)| it.offset + it.size)
                .max()
                .unwrap_or(0);
            let failing = failure.and_then(|f| f.tensor);
            let mut unplaced: Vec<MemLoc> = m
                .mems()
                .space
                .keys()
                .filter(|&v| {
                    m.mems().space[v] == space
                        && !m.is_placed(v)
                        && (Some(v) == failing || live.interval(v).is_some_and(|iv| iv.contains(p)))
                })
                .collect();
            unplaced.sort_by_key(|&v| (Some(v) != failing, std::cmp::Reverse(m.mem_footprint(v))));
            for v in unplaced {
                let is_failing = Some(v) == failing;
                let mut size = m.mem_footprint(v);
                if is_failing {
                    if let Some((_, b)) = failure.and_then(|f| f.needed) {
                        size = b;
                    }
                }
                let (lo, hi) = live
                    .interval(v)
                    .map(|iv| (iv.start as u64, iv.end as u64 + 1))
                    .unwrap_or((p as u64, p as u64 + 1));
                demand.push((
                    v,
                    Item {
                        lower: lo,
                        upper: hi,
                        offset: base,
                        size,
                        label: m.mem_name(v).to_string(),
                        detail: format!(
                            "unplaced {} x {} B, needed at {p}",
                            m.mems().partitions[v],
                            size
                        ),
                        kind: if is_failing {
                            Kind::Failed
                        } else {
                            Kind::Unplaced
                        },
                        highlight: true,
                        partial: false,
                    },
                ));
                base += size;
            }
        }
        demand.retain_mut(|(_, it)| clip(it));
        let mut markers: Vec<Marker> = marker.into_iter().collect();
        markers.extend(ticks.iter().filter(|t| in_window(t.pos)).cloned());
        let cap_of = |s: Space| match s {
            Space::Sb => Some(t.sb_usable_bytes as u64),
            Space::Psum => Some(t.psum_usable_bytes() as u64),
            Space::Dram => None,
        };
        let name = space.upper();
        match space {
            Space::Sb => {
                let parts = t.sb_partitions.max(1);
                let any_partial = placed
                    .iter()
                    .chain(&demand)
                    .any(|(v, _)| m.mems().partitions[*v] < parts);
                let group = match t.start_rules[0].granularity {
                    g if g > 0 && g < parts && parts % g == 0 => g,
                    _ => parts.div_ceil(4).max(1),
                };
                if !any_partial {
                    let items = cap(
                        placed.into_iter().chain(demand).map(|x| x.1).collect(),
                        &mut dropped,
                    );
                    panels.push(Panel {
                        space: name.to_string(),
                        title: format!("{name}, all {parts} partitions"),
                        height: 300,
                        items,
                        capacity: cap_of(space),
                        grid: Vec::new(),
                        markers,
                    });
                } else {
                    let mut q0 = 0u16;
                    while q0 < parts {
                        let q1 = q0.saturating_add(group).min(parts);
                        let items: Vec<Item> = placed
                            .iter()
                            .chain(&demand)
                            .filter_map(|(v, it)| {
                                let b = if m.is_placed(*v) {
                                    m.mems().base_partition[*v]
                                } else {
                                    0
                                };
                                let e = b.saturating_add(m.mems().partitions[*v]);
                                (b < q1 && q0 < e).then(|| Item {
                                    partial: b > q0 || e < q1,
                                    ..it.clone()
                                })
                            })
                            .collect();
                        panels.push(Panel {
                            space: name.to_string(),
                            title: format!("{name}, partitions {q0}\u{2013}{}", q1 - 1),
                            height: 160,
                            items: cap(items, &mut dropped),
                            capacity: cap_of(space),
                            grid: Vec::new(),
                            markers: markers.clone(),
                        });
                        q0 = q1;
                    }
                }
            }
            Space::Psum => {
                let bank = t.psum_bank_bytes.max(1) as u64;
                let grid = (1..=t.psum_banks as u64)
                    .map(|k| (k * bank, format!("bank {}", k - 1)))
                    .collect();
                let items = cap(
                    placed.into_iter().chain(demand).map(|x| x.1).collect(),
                    &mut dropped,
                );
                panels.push(Panel {
                    space: name.to_string(),
                    title: format!("{name}, by bank ({} each)", bytes_label(bank)),
                    height: 220,
                    items,
                    capacity: cap_of(space),
                    grid,
                    markers,
                });
            }
            Space::Dram => {
                let items = cap(
                    placed.into_iter().chain(demand).map(|x| x.1).collect(),
                    &mut dropped,
                );
                panels.push(Panel {
                    space: name.to_string(),
                    title: format!("{name}, allocator-placed locations"),
                    height: 140,
                    items,
                    capacity: None,
                    grid: Vec::new(),
                    markers,
                });
            }
        }
    }
    let mut subtitle = subtitle.to_string();
    if window.is_some() {
        subtitle.push_str(&format!(" (positions {w0}..{} of {n})", w1 - 1));
    }
    if dropped > 0 {
        subtitle.push_str(&format!(" ({dropped} smallest rectangles not drawn)"));
    }
    Chart {
        title: title.to_string(),
        subtitle,
        x_label: "program order (instruction position)".into(),
        x_start: w0,
        x_end: w1,
        panels,
    }
}

/// Colour class of a location.
fn kind_of(m: &Module, v: MemLoc) -> Kind {
    let f = m.mems().flags[v];
    if f.contains(MemFlags::SPILL) {
        Kind::Spill
    } else if f.contains(MemFlags::RELOAD) {
        Kind::Reload
    } else if f.contains(MemFlags::PINNED) {
        Kind::Pinned
    } else {
        match m.mems().space[v] {
            Space::Sb => Kind::Sb,
            Space::Psum => Kind::Psum,
            Space::Dram => Kind::Dram,
        }
    }
}

/// The peak of a placement: inside the live interval of the item with the
/// highest top, the position where the most bytes are live. Returns the
/// position and that top.
fn peak_position<'a>(
    n: usize,
    items: impl Iterator<Item = &'a Item> + Clone,
) -> Option<(u64, u64)> {
    let highest = items.clone().max_by_key(|it| it.offset + it.size)?;
    let mut diff = vec![0i128; n + 1];
    for it in items {
        let (s, e) = ((it.lower as usize).min(n), (it.upper as usize).min(n));
        diff[s] += it.size as i128;
        diff[e] -= it.size as i128;
    }
    let mut run = 0i128;
    let mut best: Option<(i128, u64)> = None;
    for (p, d) in diff.iter().enumerate().take(n) {
        run += d;
        let p = p as u64;
        if p >= highest.lower && p < highest.upper && best.map_or(true, |(b, _)| run > b) {
            best = Some((run, p));
        }
    }
    best.map(|(_, p)| (p, highest.offset + highest.size))
}

/// Keeps the [`MAX_ITEMS`] largest-area items, counting the rest.
fn cap(items: Vec<Item>, dropped: &mut usize) -> Vec<Item> {
    keep_largest(items, MAX_ITEMS, dropped)
}
