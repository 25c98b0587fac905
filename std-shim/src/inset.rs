//! The zoomed insets of a memory map: for each space's peak or failure, a
//! window of program positions and a range of addresses redrawn large
//! under the main map, so a failure at position 110 of 3000 or a tensor of
//! a few hundred bytes under a 192 KiB axis can be read.
//!
//! Invariants: an inset's window lies inside the chart's positions,
//! contains its marker, and spans at most as many positions as give each
//! one [`MIN_PX_PER_POSITION`] pixels; its address range covers every
//! rectangle it draws. Which positions and addresses are taken follows the
//! data: the tensors live at the marker and how far their live intervals
//! reach, and the bytes the tensors in that window occupy.
//!
//! When the main map already reads (see [`insets`]) there is no inset.

use crate::svg::{
    fits_label, keep_largest, rect_px, tick_step, Chart, Item, MarkerKind, Panel, Plot, LABEL_PX,
};

/// Pixels each position of an inset gets at least: a column wide enough
/// for a tick, a key number and a short name.
pub const MIN_PX_PER_POSITION: f64 = 16.0;
/// Positions an inset spans at least, so the marker has neighbours on both
/// sides even when what lives there is short-lived.
pub const MIN_POSITIONS: u64 = 12;
/// Rectangles an inset draws at most (the largest kept, the rest counted
/// in its title).
pub const MAX_ITEMS: usize = 1000;
/// The height of an inset plot: enough for the thinnest tensor it draws to
/// carry its name, within these bounds.
const MIN_HEIGHT: f64 = 220.0;
const MAX_HEIGHT: f64 = 480.0;
/// Characters of a title at most (one line across the picture at its
/// font size); the instruction it quotes is cut to fit.
const MAX_TITLE_CHARS: usize = 135;

/// One inset: a panel drawn on its own plot (its `top` set by the
/// renderer), taken from the main panels `sources`.
#[derive(Clone, Debug)]
pub struct Inset {
    /// The rectangles, markers and title, clipped to the window.
    pub panel: Panel,
    /// The window (`x0`, `xn`), the addresses (`y_lo`, `y_top`) and the
    /// size in pixels.
    pub plot: Plot,
    /// The main panels it redraws (one space: several when SB is drawn
    /// by partition group).
    pub sources: Vec<usize>,
    /// True when it shows a failure, else a peak.
    pub failure: bool,
}

/// The marker an inset centres on: the failure when the panel has one,
/// else its peak.
fn focus(p: &Panel) -> Option<&crate::svg::Marker> {
    p.markers
        .iter()
        .find(|m| m.kind == MarkerKind::Failure)
        .or_else(|| p.markers.iter().find(|m| m.kind == MarkerKind::Peak))
}

/// The insets of `chart`, whose main panels are drawn on `plots`: one per
/// run of consecutive panels of one space sharing one focus (the failure,
/// else the peak).
///
/// An inset is left out when the main map already shows its window
/// readably: each position there is at least [`MIN_PX_PER_POSITION`]
/// wide and every tensor drawn in the window carries its name on the main
/// map. A small module with large tensors then has none; a long program,
/// or a window with tensors too thin for their names, has one.
pub fn insets(chart: &Chart, plots: &[Plot]) -> Vec<Inset> {
    let Some(first) = plots.first() else {
        return Vec::new();
    };
    let (start, end) = (first.x0, first.x0 + first.xn.max(1));
    let max_positions = ((first.w / MIN_PX_PER_POSITION) as u64).max(MIN_POSITIONS);
    let mut out = Vec::new();
    let mut k = 0usize;
    while k < chart.panels.len() {
        let Some(p) = chart.panels.get(k) else { break };
        let mut run = k + 1;
        let key = focus(p).map(|m| (m.kind, m.pos));
        while chart
            .panels
            .get(run)
            .is_some_and(|q| q.space == p.space && focus(q).map(|m| (m.kind, m.pos)) == key)
        {
            run += 1;
        }
        let sources: Vec<usize> = (k..run).collect();
        k = run;
        let Some(mk) = focus(p) else { continue };
        if !(start..end).contains(&mk.pos) {
            continue;
        }
        let group: Vec<&Panel> = sources
            .iter()
            .filter_map(|&i| chart.panels.get(i))
            .collect();
        let (lo, hi) = window(&group, mk.pos, start, end, max_positions);
        let overlaps = |it: &Item| it.lower < hi && lo < it.upper;
        // The rectangles of the window the main map cannot name: what the
        // inset is for.
        let mut unnamed: Vec<&Item> = Vec::new();
        let mut narrow = false;
        for &i in &sources {
            let (Some(panel), Some(plot)) = (chart.panels.get(i), plots.get(i)) else {
                continue;
            };
            narrow |= plot.px_per_position() < MIN_PX_PER_POSITION;
            unnamed.extend(panel.items.iter().filter(|it| {
                let (w, rh) = rect_px(it, plot);
                overlaps(it) && !fits_label(it, w, rh)
            }));
        }
        if !narrow && unnamed.is_empty() {
            continue;
        }
        let all = merged(&group, lo, hi);
        let (y_lo, y_top) = if unnamed.is_empty() {
            addresses(all.iter(), p.capacity)
        } else {
            addresses(unnamed.iter().copied(), p.capacity)
        };
        // What lies in the address range, clipped to it by the plot.
        let shown = all
            .into_iter()
            .filter(|it| it.offset.saturating_add(it.size) > y_lo && it.offset <= y_top)
            .collect();
        let mut dropped = 0usize;
        let items = keep_largest(shown, MAX_ITEMS, &mut dropped);
        let capacity = p.capacity;
        let title = title(p, mk, lo, hi, dropped);
        let mut plot = Plot {
            left: first.left,
            top: 0.0,
            w: first.w,
            h: MIN_HEIGHT,
            x0: lo,
            xn: hi - lo,
            y_lo,
            y_top,
        };
        plot.h = height(&items, &plot);
        let markers = p
            .markers
            .iter()
            .filter(|m| (lo..hi).contains(&m.pos))
            .cloned()
            .collect();
        out.push(Inset {
            panel: Panel {
                space: p.space.clone(),
                title,
                height: plot.h as u32,
                items,
                capacity,
                grid: p.grid.clone(),
                markers,
            },
            plot,
            sources,
            failure: mk.kind == MarkerKind::Failure,
        });
    }
    out
}

/// The positions `[lo, hi)` of an inset at `at` within `[start, end)`: the
/// live intervals of the tensors live at `at`, widened to
/// [`MIN_POSITIONS`] around it, and when longer than `max` positions, the
/// `max` centred on `at`, shifted to stay inside.
fn window(group: &[&Panel], at: u64, start: u64, end: u64, max: u64) -> (u64, u64) {
    let live = group
        .iter()
        .flat_map(|p| &p.items)
        .filter(|it| it.lower <= at && at < it.upper);
    let (mut lo, mut hi) = live.fold((at, at + 1), |(lo, hi), it| {
        (lo.min(it.lower), hi.max(it.upper))
    });
    lo = lo.min(at.saturating_sub(MIN_POSITIONS / 2));
    hi = hi
        .max(at + MIN_POSITIONS - MIN_POSITIONS / 2)
        .max(lo + MIN_POSITIONS);
    if hi - lo > max {
        lo = at.saturating_sub(max / 2);
        hi = lo + max;
    }
    let len = hi - lo;
    if hi > end {
        hi = end;
        lo = end.saturating_sub(len);
    }
    if lo < start {
        lo = start;
        hi = (start + len).min(end);
    }
    (lo, hi.max(lo + 1))
}

/// The rectangles of `group` in positions `[lo, hi)`, clipped to them,
/// once each: a tensor drawn in several partition-group panels is one
/// rectangle, dashed unless it covers every group's partitions.
fn merged(group: &[&Panel], lo: u64, hi: u64) -> Vec<Item> {
    let mut out: Vec<(Item, usize)> = Vec::new();
    for it in group.iter().flat_map(|p| &p.items) {
        if it.upper <= lo || it.lower >= hi {
            continue;
        }
        let same = |x: &Item| {
            x.label == it.label
                && x.kind == it.kind
                && x.offset == it.offset
                && x.size == it.size
                && x.lower == it.lower.max(lo)
        };
        if let Some((x, n)) = out.iter_mut().find(|(x, _)| same(x)) {
            x.partial |= it.partial;
            *n += 1;
            continue;
        }
        let mut c = it.clone();
        c.lower = c.lower.max(lo);
        c.upper = c.upper.min(hi);
        out.push((c, 1));
    }
    let panels = group.len();
    out.into_iter()
        .map(|(mut it, n)| {
            it.partial |= n < panels && panels > 1;
            it
        })
        .collect()
}

/// The addresses `[y_lo, y_top]` an inset draws: the bytes `items` occupy
/// (the window's rectangles the main map cannot name, so small tensors
/// over a large one get the height), from 0 unless the empty space under
/// them would take more than a third of the axis (then from a round
/// address under the lowest), and up to the capacity when that lies within
/// a quarter of the span above the top (a failure's demand stands over
/// it).
fn addresses<'a>(
    items: impl Iterator<Item = &'a Item> + Clone,
    capacity: Option<u64>,
) -> (u64, u64) {
    let top = items
        .clone()
        .map(|it| it.offset.saturating_add(it.size))
        .max()
        .unwrap_or(1)
        .max(1);
    let bottom = items.map(|it| it.offset).min().unwrap_or(0).min(top - 1);
    let y_lo = if bottom > (top - bottom) / 2 {
        let step = tick_step(top - bottom, 6, true);
        bottom / step * step
    } else {
        0
    };
    let y_top = match capacity {
        Some(c) if c > top && c - top <= (top - y_lo) / 4 => c,
        _ => top,
    };
    (y_lo, y_top)
}

/// Pixels above a name's minimum an inset gives each rectangle, so the
/// name clears the outlines.
const LABEL_MARGIN: f64 = 6.0;

/// The height that gives every rectangle of `items` on `plot` the pixels
/// its name needs, with [`LABEL_MARGIN`] where that fits, within
/// [`MIN_HEIGHT`]..[`MAX_HEIGHT`]; a rectangle too thin even at
/// [`MAX_HEIGHT`] (a key names it) does not raise it.
fn height(items: &[Item], plot: &Plot) -> f64 {
    let unit = Plot { h: 1.0, ..*plot };
    let need = items
        .iter()
        .map(|it| unit.sy(it.offset) - unit.sy(it.offset.saturating_add(it.size)))
        .filter(|&rh| rh > 0.0)
        .filter_map(|rh| {
            [LABEL_PX + LABEL_MARGIN, LABEL_PX]
                .into_iter()
                .map(|px| px / rh)
                .find(|&h| h <= MAX_HEIGHT)
        })
        .fold(0.0f64, f64::max);
    need.clamp(MIN_HEIGHT, MAX_HEIGHT)
}

/// `SB around the peak 33.2 KiB at 46, positions 20..71: `%x = …``, or
/// `PSUM around the failure at 79, positions 71..117: `%p = memset` (block
/// b, 9th)`: the instruction last, cut to keep the title on one line.
fn title(p: &Panel, mk: &crate::svg::Marker, lo: u64, hi: u64, dropped: usize) -> String {
    let what = match mk.kind {
        MarkerKind::Failure => format!("the failure at {}", mk.pos),
        _ => format!("the {}", mk.label),
    };
    let mut s = format!("{} around {what}, positions {lo}..{}", p.space, hi - 1);
    if dropped > 0 {
        s.push_str(&format!(" ({dropped} smallest not drawn)"));
    }
    if !mk.at.is_empty() {
        let room = MAX_TITLE_CHARS.saturating_sub(s.chars().count() + 2);
        let mut at: String = mk.at.chars().take(room).collect();
        if at.len() < mk.at.len() {
            at.pop();
            at.push('\u{2026}');
        }
        s.push_str(&format!(": {at}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn panel(items: Vec<Item>) -> Panel {
        Panel {
            space: "SB".into(),
            title: "SB".into(),
            height: 300,
            items,
            capacity: Some(200_000),
            grid: Vec::new(),
            markers: Vec::new(),
        }
    }

    #[test]
    fn the_window_follows_the_live_set_within_the_bounds() {
        // Live at 110: [100, 130) and [105, 112): the window is their
        // extent; a tensor not live at 110 does not widen it.
        let p = panel(vec![
            Item::sb("a", 100, 130, 0, 10),
            Item::sb("b", 105, 112, 10, 10),
            Item::sb("c", 0, 90, 0, 10),
        ]);
        assert_eq!(window(&[&p], 110, 0, 3000, 52), (100, 130));
        // A short live set is widened to MIN_POSITIONS around the marker.
        let q = panel(vec![Item::sb("a", 110, 111, 0, 10)]);
        assert_eq!(window(&[&q], 110, 0, 3000, 52), (104, 116));
        assert_eq!(window(&[&q], 1, 0, 3000, 52), (0, 12));
        assert_eq!(window(&[&q], 1, 0, 5, 52), (0, 5));
        // A live set over the whole program is cut to `max` centred on
        // the marker, and shifted to stay inside.
        let r = panel(vec![Item::sb("w", 0, 3000, 0, 10)]);
        assert_eq!(window(&[&r], 110, 0, 3000, 52), (84, 136));
        assert_eq!(window(&[&r], 2999, 0, 3000, 52), (2948, 3000));
        assert_eq!(window(&[&r], 3, 0, 3000, 52), (0, 52));
        // Inside an --svg-window.
        assert_eq!(window(&[&r], 1001, 1000, 2000, 52), (1000, 1052));
    }

    fn chart(positions: u64, items: Vec<Item>) -> Chart {
        let mut p = panel(items);
        p.markers.push(crate::svg::Marker {
            pos: 1,
            kind: MarkerKind::Peak,
            label: "peak".into(),
            at: "`%a = memset`".into(),
        });
        Chart {
            x_end: positions,
            panels: vec![p],
            ..Chart::default()
        }
    }

    fn plots(c: &Chart) -> Vec<Plot> {
        c.panels
            .iter()
            .map(|p| Plot {
                left: 78.0,
                top: 0.0,
                w: 842.0,
                h: p.height as f64,
                x0: 0,
                xn: c.x_end,
                y_lo: 0,
                y_top: 200_000,
            })
            .collect()
    }

    #[test]
    fn a_readable_map_has_no_inset_and_a_long_one_has() {
        // Four positions, two tensors each half the axis: both named.
        let big = vec![
            Item::sb("a", 0, 4, 0, 100_000),
            Item::sb("b", 0, 4, 100_000, 100_000),
        ];
        let c = chart(4, big.clone());
        assert!(insets(&c, &plots(&c)).is_empty());
        // The same over 3000 positions: each is a sliver.
        let c = chart(
            3000,
            vec![
                Item::sb("a", 0, 4, 0, 100_000),
                Item::sb("b", 1, 3, 100_000, 100_000),
            ],
        );
        let got = insets(&c, &plots(&c));
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].plot.x0, got[0].plot.xn), (0, MIN_POSITIONS));
        assert_eq!(got[0].panel.items.len(), 2);
        assert_eq!(
            got[0].panel.title,
            "SB around the peak, positions 0..11: `%a = memset`"
        );
        // Four readable positions with a tensor too thin for its name.
        let mut thin = big;
        thin.push(Item::sb("c", 0, 2, 199_990, 10));
        let c = chart(4, thin);
        assert_eq!(insets(&c, &plots(&c)).len(), 1);
    }

    #[test]
    fn partition_groups_merge_into_one_inset() {
        // %w covers the first group only, %a both (not partial in either).
        let mut q0 = panel(vec![
            Item::sb("w", 0, 2, 0, 10),
            Item::sb("a", 1, 3, 10, 10),
        ]);
        q0.items[0].partial = true;
        let q1 = panel(vec![Item::sb("a", 1, 3, 10, 10)]);
        let m = merged(&[&q0, &q1], 0, 3);
        assert_eq!(m.len(), 2, "{m:?}");
        assert!(m.iter().find(|i| i.label == "w").is_some_and(|i| i.partial));
        assert!(m
            .iter()
            .find(|i| i.label == "a")
            .is_some_and(|i| !i.partial));
    }

    #[test]
    fn addresses_zoom_to_the_occupied_range() {
        // Tensors at 100000..100400 only: the axis starts at a round
        // address under them, not at 0.
        let items = [
            Item::sb("a", 0, 1, 100_000, 200),
            Item::sb("b", 0, 1, 100_200, 200),
        ];
        let (lo, top) = addresses(items.iter(), Some(200_000));
        assert!(lo > 99_000 && lo <= 100_000, "{lo}");
        assert_eq!(top, 100_400);
        // Low tensors keep the origin; a capacity just above is included.
        let items = [
            Item::sb("a", 0, 1, 0, 1000),
            Item::sb("b", 0, 1, 1000, 15_000),
        ];
        assert_eq!(addresses(items.iter(), Some(16_384)), (0, 16_384));
        assert_eq!(addresses(items.iter(), Some(200_000)), (0, 16_000));
    }
}
