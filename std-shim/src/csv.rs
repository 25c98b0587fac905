//! The MiniMalloc / TelaMalloc buffer CSV (README, `tusk dsa`).
//!
//! A header line `id,lower,upper,size[,alignment][,offset]`, then one buffer
//! per line: an id (any text without a comma), the half-open lifetime
//! `[lower, upper)`, the size in bytes, optionally an alignment (empty or
//! absent: 1) and a fixed offset (empty: not pinned). Blank lines are
//! skipped; `\r\n` line ends are accepted. Every error names the line and
//! column; no input makes the reader panic. Two pinned buffers that overlap
//! in time and address cannot both keep their offsets, so the reader
//! refuses them, naming both (ids, lines, lifetimes, byte ranges), before
//! any allocator sees the problem. The capacity is not in the file: it
//! comes from the command line or from a file name like `C.1048576.csv`
//! ([`capacity_from_name`]).
//!
//! The writer writes the rows back with the columns read (without a given
//! offset column) and an `offset` column with the placement.

use std::fmt;
use std::io::Write;
use std::path::Path;

use tusk_core::dsa::{Buffer, NamedDisplay, Placement, Problem, ProblemError};

/// A parsed buffer table: the ids and the problem (capacity 0 until set).
#[derive(Debug)]
pub struct Table {
    /// The id of each buffer, as written.
    pub ids: Vec<String>,
    /// The buffers (linear problem).
    pub problem: Problem,
    /// True when the file had an alignment column.
    pub has_alignment: bool,
}

/// A malformed CSV, with its position (1-based line and column).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsvError {
    /// Line of the error.
    pub line: usize,
    /// Column (in characters) of the error.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for CsvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.message)
    }
}

impl std::error::Error for CsvError {}

const COLUMNS: [&str; 6] = ["id", "lower", "upper", "size", "alignment", "offset"];

/// Parses a buffer CSV from raw bytes.
pub fn parse(bytes: &[u8]) -> Result<Table, CsvError> {
    let err = |line: usize, column: usize, message: String| CsvError {
        line,
        column,
        message,
    };
    let rows = bytes.split(|&b| b == b'\n').count();
    let mut table = Table {
        ids: Vec::with_capacity(rows),
        problem: Problem::linear(0, rows),
        has_alignment: false,
    };
    let mut columns: Option<Vec<&'static str>> = None;
    // Where each pinned buffer was read.
    let mut pins: Vec<Pin> = Vec::new();
    for (k, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let line_no = k + 1;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let line = std::str::from_utf8(raw).map_err(|e| {
            err(
                line_no,
                e.valid_up_to() + 1,
                "not valid UTF-8 text".to_string(),
            )
        })?;
        if line.trim().is_empty() {
            continue;
        }
        // Fields with their 1-based starting columns.
        let mut fields: Vec<(usize, &str)> = Vec::with_capacity(6);
        let mut col = 1;
        for f in line.split(',') {
            fields.push((col, f.trim()));
            col += f.chars().count() + 1;
        }
        let Some(cols) = &columns else {
            // The header.
            let mut names = Vec::with_capacity(fields.len());
            for (i, &(c, name)) in fields.iter().enumerate() {
                let expected = COLUMNS.get(i).copied();
                let ok = match i {
                    0..=3 => expected == Some(name),
                    4 => name == "alignment" || name == "offset",
                    5 => name == "offset" && names.get(4) == Some(&"alignment"),
                    _ => false,
                };
                if !ok {
                    return Err(err(
                        line_no,
                        c,
                        format!(
                            "header column {} is `{name}`; expected `id,lower,upper,size[,alignment][,offset]`",
                            i + 1
                        ),
                    ));
                }
                names.push(COLUMNS.iter().copied().find(|&n| n == name).unwrap_or("id"));
            }
            if names.len() < 4 {
                return Err(err(
                    line_no,
                    col,
                    "header needs at least `id,lower,upper,size`".to_string(),
                ));
            }
            table.has_alignment = names.contains(&"alignment");
            columns = Some(names);
            continue;
        };
        if fields.len() != cols.len() {
            return Err(err(
                line_no,
                fields.last().map_or(1, |f| f.0),
                format!("{} fields, the header has {}", fields.len(), cols.len()),
            ));
        }
        let number = |i: usize, empty_ok: bool| -> Result<Option<u64>, CsvError> {
            let (c, text) = fields[i];
            if text.is_empty() && empty_ok {
                return Ok(None);
            }
            text.parse::<u64>().map(Some).map_err(|_| {
                err(
                    line_no,
                    c,
                    format!("{} `{text}` is not a non-negative integer", cols[i]),
                )
            })
        };
        let (id_col, id) = fields[0];
        if id.is_empty() {
            return Err(err(line_no, id_col, "empty id".to_string()));
        }
        let lower = number(1, false)?.unwrap_or(0);
        let upper = number(2, false)?.unwrap_or(0);
        let size = number(3, false)?.unwrap_or(0);
        let mut align = 1;
        let mut pin = None;
        for (i, &col) in cols.iter().enumerate().skip(4) {
            match col {
                "alignment" => align = number(i, true)?.unwrap_or(1),
                _ => pin = number(i, true)?.map(|offset| Placement { offset, base: 0 }),
            }
        }
        if pin.is_some() {
            pins.push(Pin {
                index: table.ids.len(),
                line: line_no,
                column: fields[cols.len() - 1].0,
            });
        }
        // The id goes in first, so that the error names the buffer by it.
        table.ids.push(id.to_string());
        table
            .problem
            .push(Buffer {
                lower,
                upper,
                size,
                align,
                partitions: 1,
                pin,
            })
            .map_err(|e| {
                let column = match e {
                    ProblemError::ReversedLifetime { .. } => fields[2].0,
                    ProblemError::ZeroAlignment { .. } => fields[4].0,
                    ProblemError::IllegalPin { .. } => fields[cols.len() - 1].0,
                    _ => fields[3].0,
                };
                err(line_no, column, e.named(table.ids.as_slice()).to_string())
            })?;
    }
    if columns.is_none() {
        return Err(err(
            1,
            1,
            "empty file: expected the header `id,lower,upper,size[,alignment][,offset]`"
                .to_string(),
        ));
    }
    check_pins(&table, &pins)?;
    Ok(table)
}

/// Where a pinned buffer was read: its index, line and offset column.
#[derive(Clone, Copy, Debug)]
struct Pin {
    index: usize,
    line: usize,
    column: usize,
}

/// Refuses two pinned buffers that share an instant and a byte. A sweep in
/// lifetime order keeps the pinned buffers live at the current instant in
/// an offset-ordered map; they are pairwise disjoint (else the sweep has
/// already stopped), so a new one can only overlap its neighbours there:
/// O(p log p) for p pins.
fn check_pins(table: &Table, pins: &[Pin]) -> Result<(), CsvError> {
    use std::cmp::Reverse;
    use std::collections::{BTreeMap, BinaryHeap};
    let bufs = table.problem.buffers();
    let span = |p: &Pin| {
        let b = &bufs[p.index];
        let at = b.pin.map_or(0, |x| x.offset);
        (b.lower, b.upper, at, at.saturating_add(b.size))
    };
    let describe = |x: &Pin| {
        let (lo, up, s, e) = span(x);
        format!(
            "`{}` (line {}: lifetime [{lo}, {up}), bytes [{s}, {e}))",
            table.ids[x.index], x.line
        )
    };
    // Void buffers (empty lifetime or size) occupy nothing.
    let mut order: Vec<Pin> = pins
        .iter()
        .copied()
        .filter(|p| !bufs[p.index].is_void())
        .collect();
    order.sort_by_key(|p| (bufs[p.index].lower, p.line));
    // offset -> live pin, and the live pins by the end of their lifetime.
    let mut live: BTreeMap<u64, Pin> = BTreeMap::new();
    let mut ends: BinaryHeap<Reverse<(u64, u64)>> = BinaryHeap::new();
    for p in order {
        let (lower, upper, start, end) = span(&p);
        while let Some(&Reverse((u, at))) = ends.peek() {
            if u > lower {
                break;
            }
            ends.pop();
            live.remove(&at);
        }
        let before = live.range(..=start).next_back().map(|(_, q)| *q);
        let after = live.range(start..).next().map(|(_, q)| *q);
        for q in [before, after].into_iter().flatten() {
            let (q_lower, q_upper, q_start, q_end) = span(&q);
            if q_start < end && start < q_end {
                let (first, second) = if q.line < p.line { (q, p) } else { (p, q) };
                return Err(CsvError {
                    line: second.line,
                    column: second.column,
                    message: format!(
                        "pinned buffers {} and {} overlap: both hold bytes [{}, {}) during [{}, {})",
                        describe(&first),
                        describe(&second),
                        start.max(q_start),
                        end.min(q_end),
                        lower.max(q_lower),
                        upper.min(q_upper)
                    ),
                });
            }
        }
        live.insert(start, p);
        ends.push(Reverse((upper, start)));
    }
    Ok(())
}

/// The capacity in a file name like `C.1048576.csv` or `input.12.csv`: the
/// last dot-separated part before `.csv`, when it is a number.
pub fn capacity_from_name(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    let stem = name.strip_suffix(".csv").unwrap_or(name);
    stem.rsplit('.').next()?.parse().ok()
}

/// Writes the table with an `offset` column holding `placements`.
pub fn write(out: &mut dyn Write, table: &Table, placements: &[Placement]) -> std::io::Result<()> {
    if table.has_alignment {
        writeln!(out, "id,lower,upper,size,alignment,offset")?;
    } else {
        writeln!(out, "id,lower,upper,size,offset")?;
    }
    for ((id, b), p) in table
        .ids
        .iter()
        .zip(table.problem.buffers())
        .zip(placements)
    {
        if table.has_alignment {
            writeln!(
                out,
                "{id},{},{},{},{},{}",
                b.lower, b.upper, b.size, b.align, p.offset
            )?;
        } else {
            writeln!(out, "{id},{},{},{},{}", b.lower, b.upper, b.size, p.offset)?;
        }
    }
    Ok(())
}

/// Writes the table to `path` atomically (through [`crate::io::write_atomic`]:
/// a temporary file in the same folder, then a rename over the target).
pub fn write_file(
    path: &Path,
    table: &Table,
    placements: &[Placement],
) -> Result<(), crate::io::IoError> {
    crate::io::write_atomic_with(path, |w| {
        let mut w = std::io::BufWriter::new(w);
        write(&mut w, table, placements)?;
        w.flush()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_ids_alignment_and_pins() {
        let t =
            parse(b"id,lower,upper,size,alignment,offset\r\nb1,0,3,4,2,\n\nb2,3,9,4,,8\n").unwrap();
        assert_eq!(t.ids, ["b1", "b2"]);
        let b = t.problem.buffers();
        assert_eq!(
            (b[0].lower, b[0].upper, b[0].size, b[0].align),
            (0, 3, 4, 2)
        );
        assert_eq!(b[0].pin, None);
        assert_eq!(b[1].align, 1);
        assert_eq!(b[1].pin, Some(Placement { offset: 8, base: 0 }));
    }

    #[test]
    fn errors_name_line_and_column() {
        let e = parse(b"id,lower,upper,size\nx,0,1x,4\n").unwrap_err();
        assert_eq!((e.line, e.column), (2, 5));
        assert!(e.to_string().contains("upper `1x`"), "{e}");
        let e = parse(b"id,lower,upper,size\nx,5,1,4\n").unwrap_err();
        assert_eq!((e.line, e.column), (2, 5));
        // Named by its id, not by its row index.
        assert!(
            e.to_string()
                .ends_with("buffer `x`: lifetime [5, 1) ends before it starts"),
            "{e}"
        );
        assert!(!e.to_string().contains("buffer 0"), "{e}");
        let e = parse(b"id,low,upper,size\n").unwrap_err();
        assert_eq!((e.line, e.column), (1, 4));
        let e = parse(b"id,lower,upper,size\nx,0,1\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.to_string().contains("3 fields"), "{e}");
        let e = parse(b"").unwrap_err();
        assert!(e.to_string().contains("empty file"), "{e}");
        let e = parse(b"id,lower,upper,size\nx,0,\xff,4\n").unwrap_err();
        assert_eq!((e.line, e.column), (2, 5));
        let e = parse(b"id,lower,upper,size\nx,-1,2,4\n").unwrap_err();
        assert_eq!(e.column, 3);
        let e = parse(b"id,lower,upper,size\nx,0,2,99999999999999999999\n").unwrap_err();
        assert_eq!(e.column, 7);
    }

    #[test]
    fn no_panic_on_arbitrary_bytes() {
        let mut state = 0x1234_5678_9abc_def0u64;
        let alphabet = b"id,lowerupsz0123456789\n\r -x\xff";
        for len in 0..400 {
            let mut bytes = b"id,lower,upper,size\n".to_vec();
            for _ in 0..len {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                bytes.push(alphabet[(state % alphabet.len() as u64) as usize]);
            }
            let _ = parse(&bytes);
            let _ = parse(&bytes[20..]);
        }
    }

    #[test]
    fn overlapping_pins_are_refused_naming_both() {
        let e =
            parse(b"id,lower,upper,size,offset\na,0,4,8,0\nfree,0,9,4,\nb,2,6,8,4\n").unwrap_err();
        assert_eq!((e.line, e.column), (4, 9), "{e}");
        assert_eq!(
            e.message,
            "pinned buffers `a` (line 2: lifetime [0, 4), bytes [0, 8)) and `b` (line 4: \
             lifetime [2, 6), bytes [4, 12)) overlap: both hold bytes [4, 8) during [2, 4)"
        );
        // The later line is named second whatever the lifetimes' order.
        let e = parse(b"id,lower,upper,size,offset\nb,2,6,8,4\na,0,4,8,0\n").unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        assert!(e.message.starts_with("pinned buffers `b` (line 2"), "{e}");
        // Touching in time or in address, or void, is no overlap.
        for ok in [
            &b"id,lower,upper,size,offset\na,0,4,8,0\nb,4,6,8,0\n"[..],
            b"id,lower,upper,size,offset\na,0,4,8,0\nb,0,4,8,8\n",
            b"id,lower,upper,size,offset\na,0,4,8,0\nb,2,2,8,0\nc,1,3,0,0\n",
            b"id,lower,upper,size,offset\na,0,9,4,0\nb,1,2,4,4\nc,3,4,4,4\nd,5,8,4,8\n",
        ] {
            assert!(parse(ok).is_ok(), "{}", String::from_utf8_lossy(ok));
        }
        // A pin over two live ones is refused, naming one of them.
        let e = parse(b"id,lower,upper,size,offset\na,0,9,4,0\nb,0,9,4,100\nc,5,6,200,2\n")
            .unwrap_err();
        assert!(
            e.message.contains("`a`") && e.message.contains("`c`"),
            "{e}"
        );
    }

    #[test]
    fn capacity_from_file_names() {
        assert_eq!(
            capacity_from_name(Path::new("d/C.1048576.csv")),
            Some(1_048_576)
        );
        assert_eq!(capacity_from_name(Path::new("input.12.csv")), Some(12));
        assert_eq!(capacity_from_name(Path::new("plain.csv")), None);
    }

    #[test]
    fn writes_rows_with_offsets() {
        let t = parse(b"id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\n").unwrap();
        let mut out = Vec::new();
        let at = [
            Placement { offset: 0, base: 0 },
            Placement { offset: 4, base: 0 },
        ];
        write(&mut out, &t, &at).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "id,lower,upper,size,offset\nb1,0,3,4,0\nb2,3,9,4,4\n"
        );
    }
}
