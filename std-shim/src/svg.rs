//! Memory-map pictures: program order on the x axis, address on the y axis,
//! one rectangle per buffer over its live interval and byte range.
//!
//! The drawing knows nothing of modules: a [`Chart`] is panels of
//! [`Item`]s (half-open position intervals × byte ranges) with markers, so
//! `tusk run --svg` (through `memmap`) and the buffer problem of `tusk dsa`
//! ([`buffer_map`]) draw with the same code. Written with the `svg` crate,
//! which escapes every label and attribute.
//!
//! Readability rules: thin outlines; fill colour by space and kind (a legend
//! lists the kinds drawn); a label only inside a rectangle large enough to
//! hold it; the live set at a highlighted position fully opaque with a dark
//! outline, the rest faded; a red dashed capacity line; tick labels in B /
//! KiB / MiB, exact in the unit of their step. Under the panels, the
//! zoomed insets [`crate::inset`] chooses, each framed on the panels it
//! redraws and joined to that frame by two lines drawn behind the panels.

use std::fmt::Write as _;

use svg::node::element::{Group, Line, Polygon, Rectangle, Text, Title};
use svg::Document;

/// What a rectangle stands for: decides its colour and legend entry.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// A tensor in the state buffer.
    Sb,
    /// A tensor in the matmul accumulator.
    Psum,
    /// A tensor in DRAM placed by the allocator.
    Dram,
    /// A location the user placed (an obstacle to the allocator).
    Pinned,
    /// A spill slot.
    Spill,
    /// A reload copy made by a spill.
    Reload,
    /// A buffer of the 1-D buffer problem.
    Buffer,
    /// A location live at the failure that is not placed (its demand,
    /// stacked).
    Unplaced,
    /// The rectangle that could not be placed.
    Failed,
}

impl Kind {
    fn fill(self) -> &'static str {
        match self {
            Kind::Sb => "#6b9bd1",
            Kind::Psum => "#9d7cc7",
            Kind::Dram => "#b0a070",
            Kind::Pinned => "#9a9a9a",
            Kind::Spill => "#f0a040",
            Kind::Reload => "#5fb86a",
            Kind::Buffer => "#6b9bd1",
            Kind::Unplaced => "#e8e8e8",
            Kind::Failed => "#e04040",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Sb => "SB tensor",
            Kind::Psum => "PSUM tensor",
            Kind::Dram => "DRAM tensor",
            Kind::Pinned => "pinned",
            Kind::Spill => "spill slot",
            Kind::Reload => "reload copy",
            Kind::Buffer => "buffer",
            Kind::Unplaced => "unplaced (demand)",
            Kind::Failed => "does not fit",
        }
    }
}

/// One rectangle: live over positions `[lower, upper)`, bytes
/// `[offset, offset + size)`.
#[derive(Clone, Debug)]
pub struct Item {
    /// First live position.
    pub lower: u64,
    /// One past the last live position.
    pub upper: u64,
    /// First byte.
    pub offset: u64,
    /// Bytes.
    pub size: u64,
    /// The name drawn inside when it fits, and the hover title.
    pub label: String,
    /// Extra hover text (address, partitions).
    pub detail: String,
    /// Colour and legend entry.
    pub kind: Kind,
    /// True for the live set at the panel's highlighted position.
    pub highlight: bool,
    /// Drawn with a dashed outline: covers only part of the panel's
    /// partitions.
    pub partial: bool,
}

#[cfg(test)]
impl Item {
    /// An SB tensor `label` live over `[lower, upper)` at `offset`, `size`
    /// bytes: the tests' rectangle.
    pub(crate) fn sb(label: &str, lower: u64, upper: u64, offset: u64, size: u64) -> Item {
        Item {
            lower,
            upper,
            offset,
            size,
            label: label.into(),
            detail: String::new(),
            kind: Kind::Sb,
            highlight: false,
            partial: false,
        }
    }
}

/// A vertical marker at one position.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum MarkerKind {
    /// The peak instruction of the panel.
    Peak,
    /// Where the allocation failed.
    Failure,
    /// A spill store instruction (a tick under the axis).
    SpillInst,
    /// A reload instruction (a tick under the axis).
    ReloadInst,
}

/// A marker at a position of a panel.
#[derive(Clone, Debug)]
pub struct Marker {
    /// The position.
    pub pos: u64,
    /// What it marks.
    pub kind: MarkerKind,
    /// Text next to a line marker (peak, failure).
    pub label: String,
    /// What stands at the position (the instruction, as messages name
    /// it), for the inset's title; may be empty.
    pub at: String,
}

/// One address space (or partition range) over program order.
#[derive(Clone, Debug, Default)]
pub struct Panel {
    /// The space drawn, as titles name it (`SB`, `PSUM`, `buffers`):
    /// consecutive panels of one space with one marker share an inset.
    pub space: String,
    /// The title above the panel.
    pub title: String,
    /// Height of the plot area in pixels.
    pub height: u32,
    /// Rectangles, drawn in order.
    pub items: Vec<Item>,
    /// The capacity line, when the space has one.
    pub capacity: Option<u64>,
    /// Light horizontal lines with a label (PSUM banks).
    pub grid: Vec<(u64, String)>,
    /// Vertical markers.
    pub markers: Vec<Marker>,
}

impl Panel {
    fn y_max(&self) -> u64 {
        let top = self
            .items
            .iter()
            .map(|i| i.offset.saturating_add(i.size))
            .max()
            .unwrap_or(0);
        let grid = self.grid.iter().map(|g| g.0).max().unwrap_or(0);
        let content = top.max(grid).max(1);
        match self.capacity {
            Some(c) if !self.capacity_off_scale() => content.max(c),
            _ => content + content / 8,
        }
    }

    /// True when the content uses under half the capacity: the axis then
    /// fits the content (a 2 % sliver under a capacity line reads as
    /// nothing) and the capacity is a note.
    fn capacity_off_scale(&self) -> bool {
        let top = self
            .items
            .iter()
            .map(|i| i.offset.saturating_add(i.size))
            .chain(self.grid.iter().map(|g| g.0))
            .max()
            .unwrap_or(0);
        self.capacity.is_some_and(|c| top.saturating_mul(2) < c)
    }
}

/// A whole picture: panels stacked over a shared x axis.
#[derive(Clone, Debug, Default)]
pub struct Chart {
    /// The title.
    pub title: String,
    /// A line under the title (figures).
    pub subtitle: String,
    /// The x axis label.
    pub x_label: String,
    /// The first position drawn (0 unless a window was asked for).
    pub x_start: u64,
    /// One past the last position.
    pub x_end: u64,
    /// The panels, top to bottom.
    pub panels: Vec<Panel>,
}

const WIDTH: f64 = 1100.0;
const LEFT: f64 = 78.0;
const RIGHT: f64 = 180.0;
const PANEL_GAP: f64 = 52.0;
const BOTTOM: f64 = 46.0;
const FONT: &str = "DejaVu Sans, Helvetica, Arial, sans-serif";

/// Human byte count: `512 B`, `24 KiB`, `1.5 MiB`.
pub fn bytes_label(b: u64) -> String {
    const K: u64 = 1024;
    let (v, unit) = if b >= K * K * K {
        (b as f64 / (K * K * K) as f64, "GiB")
    } else if b >= K * K {
        (b as f64 / (K * K) as f64, "MiB")
    } else if b >= K {
        (b as f64 / K as f64, "KiB")
    } else {
        return format!("{b} B");
    };
    if (v - v.round()).abs() < 0.05 {
        format!("{} {unit}", v.round() as u64)
    } else {
        format!("{v:.1} {unit}")
    }
}

/// An address tick `t` of an axis ticked every `step` bytes (a power of
/// two), exact: in the largest of B, KiB, MiB, GiB that is at most the step
/// (`16 KiB`, `18 KiB`; `16640 B`, `16704 B` on a zoomed axis, where
/// `16.2 KiB` would repeat).
fn tick_label(t: u64, step: u64) -> String {
    const K: u64 = 1024;
    let (unit, name) = [(K * K * K, "GiB"), (K * K, "MiB"), (K, "KiB")]
        .into_iter()
        .find(|&(u, _)| u <= step)
        .unwrap_or((1, "B"));
    format!("{} {name}", t / unit)
}

/// The step of about `n` round ticks over a range of `span`.
pub(crate) fn tick_step(span: u64, n: u64, binary: bool) -> u64 {
    let raw = (span / n.max(1)).max(1);
    if binary {
        let mut s = 1u64;
        while s < raw {
            s *= 2;
        }
        s
    } else {
        let mut s = 1u64;
        loop {
            if s >= raw {
                break s;
            }
            if 2 * s >= raw {
                break 2 * s;
            }
            if 5 * s >= raw {
                break 5 * s;
            }
            s *= 10;
        }
    }
}

/// Up to about `n` round tick values in `[lo, hi]`: the multiples of one
/// round step (1, 2, 5 steps; powers of two for byte axes).
fn ticks_in(lo: u64, hi: u64, n: u64, binary: bool) -> Vec<u64> {
    let step = tick_step(hi.saturating_sub(lo), n, binary);
    (lo.div_ceil(step)..=hi / step).map(|k| k * step).collect()
}

fn text(x: f64, y: f64, size: u32, anchor: &str, s: &str) -> Text {
    Text::new(s)
        .set("x", fmt_f(x))
        .set("y", fmt_f(y))
        .set("font-size", size)
        .set("font-family", FONT)
        .set("text-anchor", anchor)
}

/// `t` with a white halo: legible over the lines drawn under it (markers,
/// the connectors of the insets).
fn halo(t: Text) -> Text {
    t.set("stroke", "white")
        .set("stroke-width", 3)
        .set("stroke-linejoin", "round")
        .set("paint-order", "stroke")
}

/// Coordinates with one decimal: keeps the file small.
fn fmt_f(v: f64) -> String {
    let mut s = String::new();
    let _ = write!(s, "{:.1}", v);
    if let Some(t) = s.strip_suffix(".0") {
        t.to_string()
    } else {
        s
    }
}

/// Where a panel is drawn: positions `[x0, x0 + xn)` across `w` pixels from
/// `left`, bytes from `y_lo` up `h` pixels from `top + h`. The axis is
/// labelled up to `y_top` and runs 4 % of the span beyond it, so the top
/// rectangle does not touch the frame.
#[derive(Copy, Clone, Debug)]
pub struct Plot {
    /// Left edge in pixels.
    pub left: f64,
    /// Top edge in pixels.
    pub top: f64,
    /// Width in pixels.
    pub w: f64,
    /// Height in pixels.
    pub h: f64,
    /// The first position drawn.
    pub x0: u64,
    /// How many positions are drawn (at least 1).
    pub xn: u64,
    /// The lowest address drawn.
    pub y_lo: u64,
    /// The highest address labelled.
    pub y_top: u64,
}

impl Plot {
    /// The address at the top edge.
    fn y_hi(&self) -> f64 {
        self.y_top as f64 + self.y_top.saturating_sub(self.y_lo) as f64 * 0.04
    }

    /// The highest address inside the plot: rectangles are cut there.
    fn y_clip(&self) -> u64 {
        self.y_hi().ceil() as u64
    }

    fn span(&self) -> f64 {
        (self.y_hi() - self.y_lo as f64).max(1.0)
    }

    /// The x pixel of the left edge of position `p`.
    pub fn sx(&self, p: u64) -> f64 {
        self.left + self.w * (p.saturating_sub(self.x0) as f64 / self.xn.max(1) as f64)
    }

    /// The y pixel of address `b` (addresses below `y_lo` at the bottom).
    pub fn sy(&self, b: u64) -> f64 {
        self.top + self.h - self.h * (b.saturating_sub(self.y_lo) as f64 / self.span())
    }

    /// The width of one position in pixels.
    pub fn px_per_position(&self) -> f64 {
        self.w / self.xn.max(1) as f64
    }
}

/// The pixels per position from which the x axis ticks every position and
/// labels positions at their centres (each position is a visible column).
const COLUMN_PX: f64 = 6.0;
/// Colour of the frame and connector of an inset at a peak (a failure's
/// uses the failure marker's red).
const PEAK_INSET: &str = "#0a7d8c";
const FAILURE_RED: &str = "#d02020";

/// Renders `chart` as an SVG document: the panels over one x axis, then an
/// inset per space that needs one ([`crate::inset`]), each framed where it
/// is taken from on the main map and joined to that frame.
pub fn render(chart: &Chart) -> Document {
    let plot_w = WIDTH - LEFT - RIGHT;
    let x0 = chart.x_start.min(chart.x_end.saturating_sub(1));
    // The positions drawn.
    let xn = chart.x_end.saturating_sub(x0).max(1);
    let mut plots: Vec<Plot> = chart
        .panels
        .iter()
        .map(|p| Plot {
            left: LEFT,
            top: 0.0,
            w: plot_w,
            h: p.height as f64,
            x0,
            xn,
            y_lo: 0,
            y_top: p.y_max(),
        })
        .collect();
    // The names of the tensors too thin to carry them, listed under each
    // panel by the key drawn at (or next to) each rectangle.
    let keys: Vec<Vec<String>> = chart
        .panels
        .iter()
        .zip(&plots)
        .map(|(p, pl)| key_lines(p, pl))
        .collect();
    let mut insets = crate::inset::insets(chart, &plots);
    let inset_keys: Vec<Vec<String>> = insets
        .iter()
        .map(|i| key_lines(&i.panel, &i.plot))
        .collect();
    let panels_h: f64 = chart
        .panels
        .iter()
        .zip(&keys)
        .map(|(p, k)| p.height as f64 + PANEL_GAP + KEY_LINE * k.len() as f64)
        .sum();
    let insets_h: f64 = insets
        .iter()
        .zip(&inset_keys)
        .map(|(i, k)| INSET_GAP + i.plot.h + BOTTOM + 12.0 + KEY_LINE * k.len() as f64)
        .sum();
    let sub = wrap(&chart.subtitle, 160);
    // Title, subtitle lines, the legend row.
    let top = 36.0 + 14.0 * sub.len() as f64 + 24.0;
    let height = top + panels_h + BOTTOM + insets_h;
    let mut doc = Document::new()
        .set("viewBox", (0, 0, WIDTH as u32, height.ceil() as u32))
        .set("width", WIDTH as u32)
        .set("height", height.ceil() as u32)
        .add(
            Rectangle::new()
                .set("width", "100%")
                .set("height", "100%")
                .set("fill", "white"),
        )
        .add(text(LEFT, 22.0, 16, "start", &chart.title).set("font-weight", "bold"));
    for (k, line) in sub.iter().enumerate() {
        doc = doc.add(text(LEFT, 40.0 + 14.0 * k as f64, 11, "start", line).set("fill", "#444"));
    }
    doc = doc.add(legend(chart, !insets.is_empty(), LEFT, top - 10.0));
    let mut y0 = top;
    // Where the x axis goes: under the last panel, above its key list.
    let mut axis_y = y0;
    let mut groups = Vec::new();
    for (pi, ((panel, key_text), plot)) in
        chart.panels.iter().zip(&keys).zip(&mut plots).enumerate()
    {
        y0 += PANEL_GAP - 12.0;
        plot.top = y0;
        let h = plot.h;
        // Under the panel; under the x axis and its label for the last.
        let key_y = if pi + 1 == chart.panels.len() {
            h + 46.0
        } else {
            h + 22.0
        };
        groups.push(draw_panel(panel, plot, key_text, "tensor", key_y).set("class", "panel"));
        axis_y = y0 + h + 12.0;
        y0 += h + 12.0 + KEY_LINE * key_text.len() as f64;
    }
    let main_bottom = top + panels_h + BOTTOM;
    let mut y = main_bottom;
    for (inset, key_text) in insets.iter_mut().zip(&inset_keys) {
        y += INSET_GAP;
        inset.plot.top = y;
        y += inset.plot.h + BOTTOM + 12.0 + KEY_LINE * key_text.len() as f64;
    }
    // Connectors first, so the panels they pass behind hide them.
    for inset in &insets {
        let colour = inset_colour(inset);
        if let Some(src) = inset.sources.last().and_then(|&k| plots.get(k)) {
            let (lo, hi) = (inset.plot.x0, inset.plot.x0 + inset.plot.xn);
            let (fx0, fx1) = frame_x(src, lo, hi);
            let fy = src.sy(inset.plot.y_lo);
            for (xa, xb) in [
                (fx0, inset.plot.left),
                (fx1, inset.plot.left + inset.plot.w),
            ] {
                doc = doc.add(
                    Line::new()
                        .set("class", "inset-connector")
                        .set("x1", fmt_f(xa))
                        .set("y1", fmt_f(fy))
                        .set("x2", fmt_f(xb))
                        .set("y2", fmt_f(inset.plot.top))
                        .set("stroke", colour)
                        .set("stroke-width", 0.8)
                        .set("stroke-opacity", 0.7),
                );
            }
        }
    }
    for g in groups {
        doc = doc.add(g);
    }
    if let Some(first) = plots.first() {
        doc = doc.add(x_axis(first, axis_y, &chart.x_label));
    }
    doc = doc.add(y_label(top + panels_h / 2.0));
    for (inset, key_text) in insets.iter().zip(&inset_keys) {
        let colour = inset_colour(inset);
        let p = &inset.plot;
        let g = draw_panel(&inset.panel, p, key_text, "inset-tensor", p.h + 46.0)
            .set("class", "inset")
            .set("data-space", inset.panel.space.as_str())
            .set("data-window", format!("{}:{}", p.x0, p.x0 + p.xn))
            .add(
                Rectangle::new()
                    .set("x", fmt_f(p.left))
                    .set("y", fmt_f(p.top))
                    .set("width", fmt_f(p.w))
                    .set("height", fmt_f(p.h))
                    .set("fill", "none")
                    .set("stroke", colour)
                    .set("stroke-width", 1.6),
            )
            .add(x_axis(p, p.top + p.h + 12.0, &chart.x_label))
            .add(y_label(p.top + p.h / 2.0));
        doc = doc.add(g);
        // The frame on each main panel the inset redraws.
        for src in inset.sources.iter().filter_map(|&k| plots.get(k)) {
            let (fx0, fx1) = frame_x(src, p.x0, p.x0 + p.xn);
            let (fy0, fy1) = (src.sy(p.y_top.max(p.y_lo + 1)), src.sy(p.y_lo));
            doc = doc.add(
                Rectangle::new()
                    .set("class", "inset-frame")
                    .set("x", fmt_f(fx0))
                    .set("y", fmt_f(fy0.min(fy1 - 2.0)))
                    .set("width", fmt_f(fx1 - fx0))
                    .set("height", fmt_f((fy1 - fy0).max(2.0)))
                    .set("fill", "none")
                    .set("stroke", colour)
                    .set("stroke-width", 1.4),
            );
        }
    }
    doc
}

/// Horizontal gap above an inset: its title and room for the connectors.
const INSET_GAP: f64 = 64.0;

fn inset_colour(inset: &crate::inset::Inset) -> &'static str {
    if inset.failure {
        FAILURE_RED
    } else {
        PEAK_INSET
    }
}

/// The x pixels of positions `[lo, hi)` on `plot`, at least 3 pixels apart
/// so the frame of a narrow window still shows.
fn frame_x(plot: &Plot, lo: u64, hi: u64) -> (f64, f64) {
    let (a, b) = (plot.sx(lo), plot.sx(hi));
    let mid = (a + b) / 2.0;
    if b - a < 3.0 {
        (mid - 1.5, mid + 1.5)
    } else {
        (a, b)
    }
}

/// The y axis title, rotated, centred at `y`.
fn y_label(y: f64) -> Text {
    text(16.0, y, 12, "middle", "address (bytes per partition)")
        .set("transform", format!("rotate(-90 16 {})", fmt_f(y)))
}

/// The x axis of `plot` at `y` (the tick labels' baseline; the ticks just
/// above it) with its `label`. When positions are columns wide enough to
/// see, every position gets a tick at its centre and the labels name
/// positions at their centres; else the labels mark position boundaries.
fn x_axis(plot: &Plot, y: f64, label: &str) -> Group {
    let (x0, end) = (plot.x0, plot.x0 + plot.xn);
    let columns = plot.px_per_position() >= COLUMN_PX;
    let half = if columns {
        plot.px_per_position() / 2.0
    } else {
        0.0
    };
    let tick = |x: f64, len: f64| {
        Line::new()
            .set("x1", fmt_f(x))
            .set("x2", fmt_f(x))
            .set("y1", fmt_f(y - 12.0))
            .set("y2", fmt_f(y - 12.0 + len))
            .set("stroke", "#666")
    };
    let mut g = Group::new().set("class", "x-axis");
    // Labels at least ~40 px apart.
    let per_label = (40.0 / plot.px_per_position()).ceil().max(1.0) as u64;
    let step = tick_step(plot.xn, 10, false).max(tick_step(per_label, 1, false));
    let last = if columns {
        end.saturating_sub(1)
    } else {
        end.max(1)
    };
    if columns {
        for p in x0..end {
            g = g.add(tick(plot.sx(p) + half, 2.0));
        }
    }
    for t in (x0.div_ceil(step) * step..=last).step_by(step as usize) {
        let x = plot.sx(t) + half;
        g = g
            .add(tick(x, 4.0))
            .add(halo(text(x, y + 2.0, 10, "middle", &t.to_string())).set("fill", "#333"));
    }
    g.add(halo(text(
        plot.left + plot.w / 2.0,
        y + 20.0,
        12,
        "middle",
        label,
    )))
}

/// One panel drawn on `plot`: its title, frame, address ticks, grid, the
/// rectangles (class `rect_class`) with their names or keys, the capacity,
/// the markers, and `key_text` `key_y` below the plot's top.
fn draw_panel(
    panel: &Panel,
    plot: &Plot,
    key_text: &[String],
    rect_class: &str,
    key_y: f64,
) -> Group {
    let (left, y0, plot_w, h) = (plot.left, plot.top, plot.w, plot.h);
    let mut key = 0usize;
    let mut g = Group::new();
    g = g.add(halo(text(left, y0 - 8.0, 12, "start", &panel.title)).set("font-weight", "bold"));
    g = g.add(
        Rectangle::new()
            .set("x", fmt_f(left))
            .set("y", fmt_f(y0))
            .set("width", fmt_f(plot_w))
            .set("height", fmt_f(h))
            .set("fill", "#fbfbfb")
            .set("stroke", "#888")
            .set("stroke-width", 0.8),
    );
    // y ticks
    let n = (h / 36.0).max(2.0) as u64;
    let step = tick_step(plot.y_top.saturating_sub(plot.y_lo), n, true);
    for t in ticks_in(plot.y_lo, plot.y_top, n, true) {
        let y = plot.sy(t);
        g = g
            .add(
                Line::new()
                    .set("x1", fmt_f(left - 4.0))
                    .set("x2", fmt_f(left))
                    .set("y1", fmt_f(y))
                    .set("y2", fmt_f(y))
                    .set("stroke", "#666"),
            )
            .add(text(left - 6.0, y + 3.5, 10, "end", &tick_label(t, step)).set("fill", "#333"));
    }
    let in_range = |b: u64| b >= plot.y_lo && b as f64 <= plot.y_hi();
    for (b, label) in panel.grid.iter().filter(|g| in_range(g.0)) {
        let y = plot.sy(*b);
        g = g
            .add(across(plot, y, "#c8c8c8", 0.6, "2 3"))
            .add(text(left + plot_w + 4.0, y + 10.0, 9, "start", label).set("fill", "#777"));
    }
    let any_highlight = panel.items.iter().any(|i| i.highlight);
    for it in &panel.items {
        let x1 = plot.sx(it.lower);
        let ya = plot.sy(it.offset.saturating_add(it.size).min(plot.y_clip()));
        let (w, rh) = rect_px(it, plot);
        let faded = any_highlight && !it.highlight;
        let mut r = Rectangle::new()
            .set("class", rect_class)
            .set("data-tensor", it.label.as_str())
            .set("x", fmt_f(x1))
            .set("y", fmt_f(ya))
            .set("width", fmt_f(w))
            .set("height", fmt_f(rh))
            .set("fill", it.kind.fill())
            .set("fill-opacity", if faded { 0.45 } else { 0.9 })
            .set("stroke", if it.highlight { "#111" } else { "#333" })
            .set(
                "stroke-width",
                if it.highlight {
                    1.3
                } else if faded {
                    0.3
                } else {
                    0.5
                },
            );
        if it.partial {
            r = r.set("stroke-dasharray", "3 2");
        }
        if it.kind == Kind::Unplaced || it.kind == Kind::Failed {
            r = r.set("stroke-dasharray", "4 2").set("stroke", "#a00");
        }
        let title = if it.detail.is_empty() {
            it.label.clone()
        } else {
            format!("{} {}", it.label, it.detail)
        };
        r = r.add(Title::new(title));
        g = g.add(r);
        // The name where it fits (~6 px per character at 10 px), else
        // a key number, listed with the name under the panel: inside
        // when the key fits, else just above the rectangle's start.
        if fits_label(it, w, rh) {
            g = g.add(
                text(x1 + w / 2.0, ya + rh / 2.0 + 3.5, 10, "middle", &it.label)
                    .set("fill", "#111")
                    .set("pointer-events", "none"),
            );
        } else if key < MAX_KEYS {
            key += 1;
            let k = key.to_string();
            let inside = rh >= 8.0 && w >= 6.0 * k.len() as f64 + 2.0;
            let (kx, ky, anchor) = if inside {
                (x1 + w / 2.0, ya + rh / 2.0 + 3.0, "middle")
            } else {
                // Just above the sliver, at its start.
                (x1 + 2.0, ya - 1.0, "start")
            };
            g = g.add(
                text(kx, ky, 8, anchor, &k)
                    .set("fill", "#111")
                    .set("stroke", "white")
                    .set("stroke-width", 2)
                    .set("paint-order", "stroke")
                    .set("pointer-events", "none"),
            );
        }
    }
    // The capacity: a line when the axis reaches it, else a note at the top.
    let cap_line = panel.capacity.filter(|&c| in_range(c));
    if let Some(cap) = cap_line {
        let y = plot.sy(cap);
        g = g.add(across(plot, y, FAILURE_RED, 1.2, "6 3")).add(
            text(
                left + plot_w + 4.0,
                y - 3.0,
                10,
                "start",
                &format!("capacity {}", bytes_label(cap)),
            )
            .set("fill", FAILURE_RED),
        );
    } else if let Some(cap) = panel.capacity.filter(|&c| c as f64 > plot.y_hi()) {
        g = g.add(
            text(
                left + plot_w + 4.0,
                y0 + 10.0,
                10,
                "start",
                &format!("capacity {} \u{2191}", bytes_label(cap)),
            )
            .set("fill", FAILURE_RED),
        );
    }
    let label_y = match cap_line {
        Some(c) if plot.sy(c) < y0 + 16.0 => plot.sy(c) + 13.0,
        _ => y0 + 11.0,
    };
    for mk in &panel.markers {
        let x = plot.sx(mk.pos) + (plot.sx(mk.pos + 1) - plot.sx(mk.pos)) / 2.0;
        match mk.kind {
            MarkerKind::Peak | MarkerKind::Failure => {
                let colour = if mk.kind == MarkerKind::Peak {
                    "#1a1a1a"
                } else {
                    FAILURE_RED
                };
                g = g
                    .add(
                        Line::new()
                            .set("class", "marker")
                            .set("x1", fmt_f(x))
                            .set("x2", fmt_f(x))
                            .set("y1", fmt_f(y0))
                            .set("y2", fmt_f(y0 + h))
                            .set("stroke", colour)
                            .set("stroke-width", 1.2)
                            .set("stroke-dasharray", "5 3"),
                    )
                    .add(
                        // A white halo keeps the label legible over
                        // lines and rectangles; under the capacity
                        // line when that runs along the top.
                        halo(text(x + 3.0, label_y, 10, "start", &mk.label))
                            .set("fill", colour)
                            .set("font-weight", "bold"),
                    );
            }
            MarkerKind::SpillInst | MarkerKind::ReloadInst => {
                // A small triangle under the plot: down = spill store,
                // up = reload.
                let yb = y0 + h;
                let (tip, base) = if mk.kind == MarkerKind::SpillInst {
                    (yb + 7.0, yb + 1.0)
                } else {
                    (yb + 1.0, yb + 7.0)
                };
                let pts = format!(
                    "{},{} {},{} {},{}",
                    fmt_f(x - 3.5),
                    fmt_f(base),
                    fmt_f(x + 3.5),
                    fmt_f(base),
                    fmt_f(x),
                    fmt_f(tip)
                );
                let fill = if mk.kind == MarkerKind::SpillInst {
                    Kind::Spill.fill()
                } else {
                    Kind::Reload.fill()
                };
                g = g.add(
                    Polygon::new()
                        .set("points", pts)
                        .set("fill", fill)
                        .set("stroke", "#333")
                        .set("stroke-width", 0.4),
                );
            }
        }
    }
    for (k, line) in key_text.iter().enumerate() {
        g = g.add(
            halo(text(
                left,
                y0 + key_y + KEY_LINE * k as f64,
                9,
                "start",
                line,
            ))
            .set("fill", "#333"),
        );
    }
    g
}

/// A dashed line across `plot` at pixel `y`.
fn across(plot: &Plot, y: f64, stroke: &str, width: f64, dash: &str) -> Line {
    Line::new()
        .set("x1", fmt_f(plot.left))
        .set("x2", fmt_f(plot.left + plot.w))
        .set("y1", fmt_f(y))
        .set("y2", fmt_f(y))
        .set("stroke", stroke)
        .set("stroke-width", width)
        .set("stroke-dasharray", dash)
}

/// Height of one line of a panel's key list.
const KEY_LINE: f64 = 12.0;
/// Thin tensors keyed per panel at most; the list says how many more.
const MAX_KEYS: usize = 200;

/// Width and height in pixels of `it` on `plot` (the part inside the
/// plot's addresses; at least 0.6 each, so every tensor shows).
pub(crate) fn rect_px(it: &Item, plot: &Plot) -> (f64, f64) {
    let w = plot.w * ((it.upper.max(it.lower + 1) - it.lower) as f64 / plot.xn.max(1) as f64);
    let top = it.offset.saturating_add(it.size).min(plot.y_clip());
    let rh = plot.h * (top.saturating_sub(it.offset.max(plot.y_lo)) as f64 / plot.span());
    (w.max(0.6), rh.max(0.6))
}

/// True when `it`'s name fits inside its `w` x `rh` pixel rectangle.
pub(crate) fn fits_label(it: &Item, w: f64, rh: f64) -> bool {
    rh >= LABEL_PX && w >= it.label.chars().count() as f64 * 6.0 + 4.0
}

/// The height in pixels a rectangle needs for its name.
pub(crate) const LABEL_PX: f64 = 12.0;

/// The key list of `p` on `plot`: `1 %mx · 2 %sum · ...` for every
/// rectangle too thin for its name, in drawing order (the order
/// `draw_panel` numbers them), wrapped.
fn key_lines(p: &Panel, plot: &Plot) -> Vec<String> {
    let mut names = Vec::new();
    let mut more = 0usize;
    for it in &p.items {
        let (w, rh) = rect_px(it, plot);
        if fits_label(it, w, rh) {
            continue;
        }
        if names.len() < MAX_KEYS {
            names.push(format!("{} {}", names.len() + 1, it.label));
        } else {
            more += 1;
        }
    }
    if names.is_empty() {
        return Vec::new();
    }
    let mut s = format!("too thin to name: {}", names.join(" \u{b7} "));
    if more > 0 {
        s.push_str(&format!(" \u{b7} and {more} more (hover titles name them)"));
    }
    wrap(&s, 170)
}

/// Splits `s` at spaces into lines of at most about `width` characters.
fn wrap(s: &str, width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for word in s.split(' ') {
        let cur = lines.last_mut().expect("lines starts non-empty");
        if !cur.is_empty() && cur.chars().count() + 1 + word.chars().count() > width {
            lines.push(word.to_string());
        } else {
            if !cur.is_empty() {
                cur.push(' ');
            }
            cur.push_str(word);
        }
    }
    lines
}

/// The legend: one row under the title, an entry per kind and marker the
/// chart draws (`insets`: the entry for the frames of the zoomed insets).
fn legend(chart: &Chart, insets: bool, x0: f64, y: f64) -> Group {
    let mut kinds: Vec<Kind> = Vec::new();
    let mut marks: Vec<MarkerKind> = Vec::new();
    for p in &chart.panels {
        for it in &p.items {
            if !kinds.contains(&it.kind) {
                kinds.push(it.kind);
            }
        }
        for mk in &p.markers {
            if !marks.contains(&mk.kind) {
                marks.push(mk.kind);
            }
        }
    }
    kinds.sort();
    let mut g = Group::new().set("class", "legend");
    let mut x = x0;
    let advance = |x: &mut f64, label: &str| *x += 20.0 + 5.4 * label.chars().count() as f64 + 16.0;
    // A legend's sample rectangle at `x`.
    let swatch = |x: f64, fill: &str| {
        Rectangle::new()
            .set("x", fmt_f(x))
            .set("y", fmt_f(y - 9.0))
            .set("width", 14)
            .set("height", 10)
            .set("fill", fill)
    };
    for k in kinds {
        g = g
            .add(
                swatch(x, k.fill())
                    .set("stroke", "#333")
                    .set("stroke-width", 0.5),
            )
            .add(text(x + 20.0, y, 10, "start", k.name()));
        advance(&mut x, k.name());
    }
    let faded = chart
        .panels
        .iter()
        .any(|p| p.items.iter().any(|i| i.highlight) && p.items.iter().any(|i| !i.highlight));
    let partial = chart
        .panels
        .iter()
        .any(|p| p.items.iter().any(|i| i.partial));
    for (on, opacity, dash, name) in [
        (faded, 0.45, "", "pale: not live at the marked position"),
        (
            partial,
            0.9,
            "3 2",
            "dashed: covers part of the panel's partitions",
        ),
    ] {
        if on {
            g = g
                .add(
                    swatch(x, Kind::Sb.fill())
                        .set("fill-opacity", opacity)
                        .set("stroke", "#333")
                        .set("stroke-width", 0.5)
                        .set("stroke-dasharray", dash),
                )
                .add(text(x + 20.0, y, 10, "start", name));
            advance(&mut x, name);
        }
    }
    for (mk, colour, name) in [
        (MarkerKind::Peak, "#1a1a1a", "peak (its live set outlined)"),
        (MarkerKind::Failure, FAILURE_RED, "failed here"),
    ] {
        if marks.contains(&mk) {
            g = g
                .add(
                    Line::new()
                        .set("x1", fmt_f(x))
                        .set("x2", fmt_f(x + 14.0))
                        .set("y1", fmt_f(y - 4.0))
                        .set("y2", fmt_f(y - 4.0))
                        .set("stroke", colour)
                        .set("stroke-width", 1.2)
                        .set("stroke-dasharray", "5 3"),
                )
                .add(text(x + 20.0, y, 10, "start", name));
            advance(&mut x, name);
        }
    }
    if insets {
        let name = "framed: drawn larger below";
        g = g
            .add(
                swatch(x, "none")
                    .set("stroke", PEAK_INSET)
                    .set("stroke-width", 1.4),
            )
            .add(text(x + 20.0, y, 10, "start", name));
        advance(&mut x, name);
    }
    for (mk, k, name) in [
        (MarkerKind::SpillInst, Kind::Spill, "\u{25bc} spill store"),
        (MarkerKind::ReloadInst, Kind::Reload, "\u{25b2} reload"),
    ] {
        if marks.contains(&mk) {
            g = g.add(text(x, y, 10, "start", name).set("fill", k.fill()));
            advance(&mut x, name);
        }
    }
    g
}

/// Keeps the `max` largest-area items, counting the rest in `dropped`: a
/// picture of more is unreadable and its file unwieldy.
pub fn keep_largest(mut items: Vec<Item>, max: usize, dropped: &mut usize) -> Vec<Item> {
    if items.len() > max {
        items.sort_by_key(|it| {
            std::cmp::Reverse(it.size.saturating_mul(it.upper.saturating_sub(it.lower)))
        });
        *dropped += items.len() - max;
        items.truncate(max);
    }
    items
}

/// A rectangle of the 1-D buffer problem (MiniMalloc CSV): live over
/// `[lower, upper)`, placed at `offset` with `size` bytes.
#[derive(Clone, Debug)]
pub struct BufferRect {
    /// First live time.
    pub lower: u64,
    /// One past the last live time.
    pub upper: u64,
    /// Placed offset.
    pub offset: u64,
    /// Bytes.
    pub size: u64,
    /// The buffer's id.
    pub label: String,
}

/// The picture of a placed buffer problem: one panel, the capacity line,
/// the time with the highest live top marked and its live set outlined.
/// For `tusk dsa --svg`.
pub fn buffer_map(title: &str, rects: &[BufferRect], capacity: Option<u64>) -> Document {
    let x_end = rects.iter().map(|r| r.upper).max().unwrap_or(1);
    let peak = rects
        .iter()
        .max_by_key(|r| r.offset.saturating_add(r.size))
        .map(|r| r.offset.saturating_add(r.size))
        .unwrap_or(0);
    // The time of the peak: the start of the highest buffer (its top is
    // live there).
    let at = rects
        .iter()
        .filter(|r| r.offset.saturating_add(r.size) == peak)
        .map(|r| r.lower)
        .next();
    let items = rects
        .iter()
        .map(|r| Item {
            lower: r.lower,
            upper: r.upper,
            offset: r.offset,
            size: r.size,
            label: r.label.clone(),
            detail: format!("[{}, {}) @ {} + {}", r.lower, r.upper, r.offset, r.size),
            kind: Kind::Buffer,
            highlight: at.is_some_and(|t| r.lower <= t && t < r.upper),
            partial: false,
        })
        .collect();
    let markers = at
        .map(|t| Marker {
            pos: t,
            kind: MarkerKind::Peak,
            label: format!("peak {} at t={t}", bytes_label(peak)),
            at: String::new(),
        })
        .into_iter()
        .collect();
    let chart = Chart {
        title: title.to_string(),
        subtitle: format!(
            "{} buffers, peak {}{}",
            rects.len(),
            bytes_label(peak),
            capacity
                .map(|c| format!(" of {}", bytes_label(c)))
                .unwrap_or_default()
        ),
        x_label: "time".into(),
        x_start: 0,
        x_end,
        panels: vec![Panel {
            space: "buffers".into(),
            title: "buffers".into(),
            height: 420,
            items,
            capacity,
            grid: Vec::new(),
            markers,
        }],
    };
    render(&chart)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_labels_are_short() {
        assert_eq!(bytes_label(512), "512 B");
        assert_eq!(bytes_label(2048), "2 KiB");
        assert_eq!(bytes_label(1536), "1.5 KiB");
        assert_eq!(bytes_label(3 << 20), "3 MiB");
    }

    #[test]
    fn tick_labels_are_exact_in_the_unit_of_the_step() {
        assert_eq!(tick_label(16384, 2048), "16 KiB");
        assert_eq!(tick_label(16640, 64), "16640 B");
        assert_eq!(tick_label(0, 64), "0 B");
        assert_eq!(tick_label(3 << 20, 1 << 20), "3 MiB");
    }

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(
            ticks_in(0, 100, 10, false),
            (0..=10).map(|k| k * 10).collect::<Vec<_>>()
        );
        let t = ticks_in(0, 196608, 6, true);
        assert_eq!(t[1], 32768);
        assert_eq!(*t.last().unwrap(), 196608);
        // A range off the origin: multiples of the step inside it.
        assert_eq!(
            ticks_in(24_576, 34_000, 9, true),
            (12..=16).map(|k| k * 2048).collect::<Vec<_>>()
        );
    }

    #[test]
    fn buffer_map_draws_one_rect_per_buffer_and_escapes_labels() {
        let rects: Vec<BufferRect> = (0..5u64)
            .map(|k| BufferRect {
                lower: k,
                upper: k + 3,
                offset: 100 * k,
                size: 100,
                label: format!("b<{k}>"),
            })
            .collect();
        let s = buffer_map("t", &rects, Some(1000)).to_string();
        assert_eq!(s.matches("class=\"tensor\"").count(), 5);
        assert!(s.contains("b&lt;4&gt;") && !s.contains("b<4>"), "{s}");
        assert!(s.contains("capacity 1000 B"));
    }
}
