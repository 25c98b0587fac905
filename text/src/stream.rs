//! The printer on every core, streamed into a writer.
//!
//! A 5M-instruction module prints to ~374 MB of text; printed on one core
//! into one `String` and then written, the printing and the kernel's copy
//! into the page cache run one after the other while the second core idles.
//! [`write_module`] cuts the text into parts at line boundaries (the
//! declarations anywhere, the function / loop / block tree between its
//! events, a block with all its instructions), prints the parts on worker
//! threads and writes them in order from the calling thread as they
//! complete, dropping each once written.
//!
//! Invariant: the bytes written are exactly [`super::print`]'s — the parts
//! are the same line printers (`print_header`, `print_mem`,
//! `print_reg`, `print_event`) over consecutive ranges that tile the
//! module in the order `print_into` visits it. A failed write stops the
//! workers before their next part and returns the error.

use std::io::{self, Write};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;

use tusk_core::ir::{MemLoc, Module, Reg};

use super::printer::{print_event, print_header, print_mem, print_reg};
use super::walk::{walk, Event};

/// Lines (declarations or instructions) per part: ~3 MB of text, small
/// enough that the writer starts early and the workers balance, large
/// enough that the per-part cost is noise.
const LINES_PER_PART: usize = 1 << 16;

/// Bytes of text reserved per line of a part (the generator's modules
/// average ~40–45; a short guess only costs a reallocation).
const BYTES_PER_LINE: usize = 48;

/// A run of consecutive lines of the text.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece {
    /// The `target` line and the blank line after it.
    Header,
    /// Location declarations, by index.
    Mems(Range<usize>),
    /// Register declarations, by index.
    Regs(Range<usize>),
    /// Steps of the tree walk, by index into the walk's events.
    Events(Range<usize>),
}

/// One part of the text: its pieces and its size in lines.
#[derive(Clone, Debug, Default)]
struct Part {
    pieces: Vec<Piece>,
    lines: usize,
}

/// Cuts the text into parts of about `per_part` lines each (a block is
/// never cut: it counts as one line plus its instructions).
fn plan(m: &Module, events: &[Event], per_part: usize) -> Vec<Part> {
    let per_part = per_part.max(1);
    let mut parts = Vec::new();
    let mut cur = Part::default();
    let close = |cur: &mut Part, parts: &mut Vec<Part>| {
        if !cur.pieces.is_empty() {
            parts.push(std::mem::take(cur));
        }
    };
    cur.pieces.push(Piece::Header);
    cur.lines = 1;
    for (n, make) in [
        (m.num_mems(), Piece::Mems as fn(Range<usize>) -> Piece),
        (m.num_regs(), Piece::Regs as fn(Range<usize>) -> Piece),
    ] {
        let mut start = 0;
        while start < n {
            let take = (per_part.saturating_sub(cur.lines)).clamp(1, n - start);
            cur.pieces.push(make(start..start + take));
            cur.lines += take;
            start += take;
            if cur.lines >= per_part {
                close(&mut cur, &mut parts);
            }
        }
    }
    let mut first = 0;
    for (k, e) in events.iter().enumerate() {
        cur.lines += match *e {
            Event::Block(b, _) => 1 + m.block_insts(b).count(),
            _ => 1,
        };
        if cur.lines >= per_part {
            cur.pieces.push(Piece::Events(first..k + 1));
            first = k + 1;
            close(&mut cur, &mut parts);
        }
    }
    if first < events.len() {
        cur.pieces.push(Piece::Events(first..events.len()));
    }
    close(&mut cur, &mut parts);
    parts
}

/// The text of one part.
fn print_part(m: &Module, events: &[Event], part: &Part) -> String {
    let mut out = String::with_capacity(part.lines.saturating_mul(BYTES_PER_LINE));
    for piece in &part.pieces {
        match piece {
            Piece::Header => print_header(m, &mut out),
            Piece::Mems(r) => {
                for k in r.clone() {
                    print_mem(m, MemLoc::new(k), &mut out);
                }
            }
            Piece::Regs(r) => {
                for k in r.clone() {
                    print_reg(m, Reg::new(k), &mut out);
                }
            }
            Piece::Events(r) => {
                for &e in &events[r.clone()] {
                    print_event(m, e, &mut out);
                }
            }
        }
    }
    out
}

/// Writes the canonical text of `m` (byte for byte [`super::print`]'s) to
/// `w`, printing parts on up to `threads` worker threads (the calling
/// thread writes). A small module, or `threads <= 1`, prints on the
/// calling thread.
pub fn write_module(m: &Module, w: &mut dyn Write, threads: usize) -> io::Result<()> {
    let lines = 1 + m.num_mems() + m.num_regs() + m.num_live_insts();
    if threads <= 1 || lines <= LINES_PER_PART {
        return w.write_all(super::print(m).as_bytes());
    }
    let mut events = Vec::new();
    walk(m, |e| events.push(e));
    let parts = plan(m, &events, LINES_PER_PART);
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let (tx, rx) = mpsc::channel::<(usize, String)>();
    std::thread::scope(|s| {
        for _ in 0..threads.min(parts.len()) {
            let tx = tx.clone();
            let (next, stop, parts, events) = (&next, &stop, &parts, &events);
            s.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    let Some(part) = parts.get(k) else { break };
                    if tx.send((k, print_part(m, events, part))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        // Parts arrive in about the order they were taken; the ones ahead
        // of the next to write wait here.
        let mut waiting: Vec<Option<String>> = vec![None; parts.len()];
        let mut written = 0;
        let result = (|| {
            while written < parts.len() {
                let Ok((k, text)) = rx.recv() else {
                    return Err(io::Error::other("a printer thread ended early"));
                };
                waiting[k] = Some(text);
                while let Some(text) = waiting.get_mut(written).and_then(Option::take) {
                    w.write_all(text.as_bytes())?;
                    written += 1;
                }
            }
            Ok(())
        })();
        if result.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        drop(rx);
        result
    })
}

/// Worker threads for [`write_module`]: one per core the process may use.
pub fn printer_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tusk_core::gen::module::{generate, GenParams};

    fn module(instructions: usize, seed: u64) -> Module {
        generate(&GenParams::new(instructions, seed)).unwrap()
    }

    /// Every cut of the text, at every part size, writes the sequential
    /// printer's bytes.
    #[test]
    fn parts_tile_the_text_in_order() {
        for seed in [1u64, 7, 11] {
            let m = module(400, seed);
            let whole = super::super::print(&m);
            let mut events = Vec::new();
            walk(&m, |e| events.push(e));
            for per_part in [1, 2, 3, 7, 50, 1 << 20] {
                let parts = plan(&m, &events, per_part);
                let joined: String = parts.iter().map(|p| print_part(&m, &events, p)).collect();
                assert_eq!(joined, whole, "seed {seed}, {per_part} lines per part");
                if per_part == 1 {
                    assert!(parts.len() > 2, "seed {seed}: {} parts", parts.len());
                }
            }
        }
    }

    /// The threaded path (a module above one part) writes the same bytes.
    #[test]
    fn threaded_write_matches_print() {
        let m = module(3 * LINES_PER_PART, 1);
        let mut out = Vec::new();
        write_module(&m, &mut out, 3).unwrap();
        assert_eq!(out, super::super::print(&m).into_bytes());
    }

    /// A writer that fails stops the run with its error.
    #[test]
    fn a_failed_write_is_returned() {
        struct Full(usize);
        impl Write for Full {
            fn write(&mut self, b: &[u8]) -> io::Result<usize> {
                if self.0 == 0 {
                    return Err(io::Error::other("disk full"));
                }
                self.0 -= 1;
                Ok(b.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let m = module(3 * LINES_PER_PART, 1);
        let e = write_module(&m, &mut Full(1), 2).unwrap_err();
        assert_eq!(e.to_string(), "disk full");
    }
}
