//! The memory map as text (`tusk run --map`): the [`Chart`] the SVG draws,
//! for a terminal. Per panel, a window of program order around the panel's
//! marker (its peak, or the failure) goes across and addresses go up; each
//! character cell shows the tensor that covers most of it, by a letter the
//! legend under the panel names. The window is the whole program when it
//! has at most [`COLUMNS`] positions, else [`COLUMNS`] positions centred on
//! the marker, so a failure at position 110 of 3000 is as readable as one
//! in a small module.

use crate::svg::{bytes_label, Chart, Kind, MarkerKind, Panel};

/// Positions shown across at most (one character each).
pub const COLUMNS: u64 = 96;
/// Address rows per panel.
pub const ROWS: u64 = 16;
/// Letters given to tensors, in order of the area they cover in the window;
/// the rest share [`OTHER`].
const GLYPHS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const OTHER: u8 = b'#';
const FREE: u8 = b'.';

/// The text of every panel of `chart`.
pub fn render(chart: &Chart) -> String {
    let mut s = format!("{}\n{}\n", chart.title, chart.subtitle);
    for p in &chart.panels {
        s.push('\n');
        s.push_str(&panel(p, chart.x_start, chart.x_end));
    }
    s
}

/// The window `[lo, hi)` of positions `[start, end)` around `at`.
fn window(at: Option<u64>, start: u64, end: u64) -> (u64, u64) {
    if end - start <= COLUMNS {
        return (start, end);
    }
    let at = at.unwrap_or(start).clamp(start, end - 1);
    let lo = at.saturating_sub(COLUMNS / 2).clamp(start, end - COLUMNS);
    (lo, lo + COLUMNS)
}

fn panel(p: &Panel, start: u64, end: u64) -> String {
    let line = p
        .markers
        .iter()
        .find(|m| matches!(m.kind, MarkerKind::Failure))
        .or_else(|| {
            p.markers
                .iter()
                .find(|m| matches!(m.kind, MarkerKind::Peak))
        });
    let end = end.max(start + 1);
    let (lo, hi) = window(line.map(|m| m.pos), start, end);
    // The tensors of the window, largest area first: they get the letters.
    let mut shown: Vec<usize> = (0..p.items.len())
        .filter(|&k| p.items[k].lower < hi && lo < p.items[k].upper && p.items[k].size > 0)
        .collect();
    let area = |k: usize| {
        let it = &p.items[k];
        let t = it.upper.min(hi) - it.lower.max(lo);
        t.saturating_mul(it.size)
    };
    shown.sort_by_key(|&k| std::cmp::Reverse(area(k)));
    let glyph = |rank: usize| GLYPHS.get(rank).copied().unwrap_or(OTHER);
    // Addresses up to the highest byte in the window (and the capacity
    // when that is within twice as much), in ROWS rows.
    let top = shown
        .iter()
        .map(|&k| p.items[k].offset + p.items[k].size)
        .max()
        .unwrap_or(0);
    let y_max = match p.capacity {
        Some(c) if c <= top.saturating_mul(2) => c.max(top),
        _ => top,
    }
    .max(1);
    let row_bytes = y_max.div_ceil(ROWS).max(1);
    let cols = hi - lo;
    let mut grid = vec![vec![FREE; cols as usize]; ROWS as usize];
    let mut drawn = vec![false; shown.len()];
    // Each cell: the tensor covering most of its bytes at that position.
    for (r, row) in grid.iter_mut().enumerate() {
        let (b0, b1) = (r as u64 * row_bytes, (r as u64 + 1) * row_bytes);
        for (c, cell) in row.iter_mut().enumerate() {
            let pos = lo + c as u64;
            let best = shown
                .iter()
                .enumerate()
                .filter(|(_, &k)| p.items[k].lower <= pos && pos < p.items[k].upper)
                .map(|(rank, &k)| {
                    let it = &p.items[k];
                    let cover = (it.offset + it.size)
                        .min(b1)
                        .saturating_sub(it.offset.max(b0));
                    (cover, rank)
                })
                .filter(|&(cover, _)| cover > 0)
                .max_by_key(|&(cover, rank)| (cover, std::cmp::Reverse(rank)));
            if let Some((_, rank)) = best {
                *cell = glyph(rank);
                drawn[rank] = true;
            }
        }
    }
    let mut s = p.title.to_string();
    if let Some(m) = line {
        s.push_str(&format!(" \u{2014} {}", m.label));
    }
    s.push_str(&format!(" (positions {lo}..{})\n", hi - 1));
    let label_w = 10;
    let cap_row = p
        .capacity
        .filter(|&c| c <= y_max)
        .map(|c| (c / row_bytes).min(ROWS - 1));
    for r in (0..ROWS as usize).rev() {
        let label = if r as u64 == ROWS - 1 {
            bytes_label(y_max)
        } else if r == 0 {
            "0 B".to_string()
        } else {
            String::new()
        };
        let row = String::from_utf8_lossy(&grid[r]).into_owned();
        let note = if cap_row == Some(r as u64) {
            "  < capacity"
        } else {
            ""
        };
        s.push_str(&format!("{label:>label_w$} |{row}{note}\n"));
    }
    s.push_str(&format!(
        "{:>label_w$} +{}\n",
        "",
        "-".repeat(cols as usize)
    ));
    if let Some(m) = line {
        if (lo..hi).contains(&m.pos) {
            let at = (m.pos - lo) as usize;
            let what = match m.kind {
                MarkerKind::Failure => "failure",
                _ => "peak",
            };
            s.push_str(&format!(
                "{:>label_w$}  {}^ {what} at {}\n",
                "",
                " ".repeat(at),
                m.pos
            ));
        }
    }
    s.push_str(&format!(
        "{:>label_w$}  one column per position, one row per {}; `.` free\n",
        "",
        bytes_label(row_bytes)
    ));
    for (rank, &k) in shown.iter().enumerate() {
        let it = &p.items[k];
        let g = glyph(rank) as char;
        if g == OTHER as char {
            let rest = shown.len() - rank;
            s.push_str(&format!("  {g}  {rest} more tensors\n"));
            break;
        }
        // The chart's own description when it names the tensor (its
        // whole live interval, also beyond a window), else the bytes and
        // positions drawn.
        let what = if it.detail.starts_with('%') {
            it.detail.clone()
        } else {
            format!(
                "%{}  [{}, {}) live [{}, {}]{}",
                it.label,
                it.offset,
                it.offset + it.size,
                it.lower,
                it.upper.saturating_sub(1),
                if it.detail.is_empty() {
                    String::new()
                } else {
                    format!(", {}", it.detail)
                }
            )
        };
        s.push_str(&format!(
            "  {g}  {what}{}{}\n",
            kind_note(it.kind),
            if drawn[rank] {
                ""
            } else {
                "  (thinner than a row: not drawn)"
            }
        ));
    }
    if shown.is_empty() {
        s.push_str("  (nothing placed in this window)\n");
    }
    s
}

/// What the legend adds for a kind that is not a plain tensor.
fn kind_note(k: Kind) -> &'static str {
    match k {
        Kind::Pinned => "  pinned by the input",
        Kind::Spill => "  spill slot",
        Kind::Reload => "  reload copy",
        Kind::Unplaced => "  unplaced (its demand at the failure)",
        Kind::Failed => "  does not fit",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::svg::{Item, Marker};

    #[test]
    fn cells_show_the_tensor_that_covers_them() {
        let chart = Chart {
            title: "t".into(),
            subtitle: "s".into(),
            x_label: String::new(),
            x_start: 0,
            x_end: 4,
            panels: vec![Panel {
                space: "SB".into(),
                title: "SB".into(),
                height: 0,
                // %big holds the lower half over all four positions, %top
                // the upper half over the last two.
                items: vec![
                    Item::sb("big", 0, 4, 0, 800),
                    Item::sb("top", 2, 4, 800, 800),
                ],
                capacity: Some(1600),
                grid: Vec::new(),
                markers: vec![Marker {
                    pos: 3,
                    kind: MarkerKind::Peak,
                    label: "peak 1.6 KiB at 3".into(),
                    at: String::new(),
                }],
            }],
        };
        let s = render(&chart);
        let rows: Vec<&str> = s.lines().filter(|l| l.contains(" |")).collect();
        assert_eq!(rows.len(), ROWS as usize, "{s}");
        // Top row: free, free, then %top (letter B: the smaller area).
        assert!(
            rows[0].ends_with("|..BB  < capacity") || rows[0].ends_with("|..BB"),
            "{s}"
        );
        // Bottom row: %big (A) throughout.
        assert!(rows[ROWS as usize - 1].ends_with("|AAAA"), "{s}");
        assert!(s.contains("   ^ peak at 3"), "{s}");
        assert!(s.contains("  A  %big  [0, 800) live [0, 3]"), "{s}");
        assert!(s.contains("  B  %top  [800, 1600) live [2, 3]"), "{s}");
    }

    #[test]
    fn a_long_program_shows_a_window_around_the_marker() {
        assert_eq!(
            window(Some(110), 0, 3000),
            (110 - COLUMNS / 2, 110 + COLUMNS / 2)
        );
        assert_eq!(window(Some(5), 0, 3000), (0, COLUMNS));
        assert_eq!(window(Some(2999), 0, 3000), (3000 - COLUMNS, 3000));
        assert_eq!(window(None, 0, 50), (0, 50));
        // Inside an --svg-window.
        assert_eq!(window(None, 1000, 1040), (1000, 1040));
        assert_eq!(window(Some(1001), 1000, 2000), (1000, 1000 + COLUMNS));
    }
}
