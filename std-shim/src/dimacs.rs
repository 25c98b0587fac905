//! The DIMACS graph-coloring format (`.col`): `c` comment lines, one
//! `p edge N M` line (also `p col N M`), then `e u v` lines with 1-based
//! vertices. Any byte input either parses or yields a [`DimacsError`] with
//! line and column (1-based); nothing panics.

use std::fmt;

/// Most vertices accepted (a hostile-input guard).
pub const MAX_VERTICES: u64 = 4_000_000;
/// Most edges accepted.
pub const MAX_EDGES: u64 = 64_000_000;

/// A parsed graph, 0-based.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DimacsGraph {
    /// Number of vertices (`N` of the `p` line).
    pub vertices: u32,
    /// `M` as declared on the `p` line (files often count edges twice).
    pub declared_edges: u64,
    /// The `e` lines, 0-based, in file order.
    pub edges: Vec<(u32, u32)>,
}

/// A malformed file, with its position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DimacsError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column (bytes).
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for DimacsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.message)
    }
}

impl std::error::Error for DimacsError {}

fn err(line: usize, column: usize, message: impl Into<String>) -> DimacsError {
    DimacsError {
        line,
        column,
        message: message.into(),
    }
}

/// Whitespace-separated tokens of a line with their 1-based columns.
fn tokens(line: &[u8]) -> impl Iterator<Item = (usize, &[u8])> {
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < line.len() && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= line.len() {
            return None;
        }
        let s = i;
        while i < line.len() && !line[i].is_ascii_whitespace() {
            i += 1;
        }
        Some((s + 1, &line[s..i]))
    })
}

fn number(
    tok: Option<(usize, &[u8])>,
    ln: usize,
    end_col: usize,
    what: &str,
    max: u64,
) -> Result<u64, DimacsError> {
    let (col, t) = tok.ok_or_else(|| err(ln, end_col, format!("expected {what}")))?;
    if t.is_empty() || t.len() > 20 || !t.iter().all(u8::is_ascii_digit) {
        return Err(err(
            ln,
            col,
            format!("expected {what}, found `{}`", String::from_utf8_lossy(t)),
        ));
    }
    let mut v: u64 = 0;
    for &d in t {
        v = v.saturating_mul(10).saturating_add((d - b'0') as u64);
    }
    if v > max {
        return Err(err(ln, col, format!("{what} {v} is above the limit {max}")));
    }
    Ok(v)
}

/// Parses a DIMACS `.col` file.
pub fn parse(input: &[u8]) -> Result<DimacsGraph, DimacsError> {
    let mut g = DimacsGraph::default();
    let mut seen_p = false;
    for (idx, raw) in input.split(|&b| b == b'\n').enumerate() {
        let ln = idx + 1;
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        let end_col = line.len() + 1;
        let mut toks = tokens(line);
        let Some((col, kind)) = toks.next() else {
            continue;
        };
        match kind {
            b"c" => continue,
            b"p" => {
                if seen_p {
                    return Err(err(ln, col, "a second `p` line"));
                }
                match toks.next() {
                    Some((_, b"edge")) | Some((_, b"col")) => {}
                    Some((c, t)) => {
                        return Err(err(
                            ln,
                            c,
                            format!("expected `edge`, found `{}`", String::from_utf8_lossy(t)),
                        ))
                    }
                    None => return Err(err(ln, end_col, "expected `edge` after `p`")),
                }
                let n = number(toks.next(), ln, end_col, "the vertex count", MAX_VERTICES)?;
                let m = number(toks.next(), ln, end_col, "the edge count", MAX_EDGES)?;
                g.vertices = n as u32;
                g.declared_edges = m;
                g.edges.reserve(m as usize);
                seen_p = true;
            }
            b"e" => {
                if !seen_p {
                    return Err(err(ln, col, "an `e` line before the `p edge N M` line"));
                }
                let n = g.vertices as u64;
                let mut ends = [0u32; 2];
                for e in ends.iter_mut() {
                    let t = toks.next();
                    let c = t.map(|(c, _)| c).unwrap_or(end_col);
                    let v = number(t, ln, end_col, "a vertex", u64::MAX)?;
                    if v == 0 || v > n {
                        return Err(err(ln, c, format!("vertex {v} is outside 1..={n}")));
                    }
                    *e = (v - 1) as u32;
                }
                if g.edges.len() as u64 >= MAX_EDGES {
                    return Err(err(ln, col, format!("more than {MAX_EDGES} edges")));
                }
                g.edges.push((ends[0], ends[1]));
            }
            other => {
                return Err(err(
                    ln,
                    col,
                    format!(
                        "unknown line type `{}` (expected c, p or e)",
                        String::from_utf8_lossy(other)
                    ),
                ))
            }
        }
        if let Some((c, t)) = toks.next() {
            return Err(err(
                ln,
                c,
                format!(
                    "unexpected `{}` at the end of the line",
                    String::from_utf8_lossy(t)
                ),
            ));
        }
    }
    if !seen_p {
        return Err(err(1, 1, "no `p edge N M` line"));
    }
    Ok(g)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_comments_header_and_edges() {
        let g = parse(b"c hello\r\np edge 3 2\ne 1 2\n\ne 3 2\n").unwrap();
        assert_eq!(g.vertices, 3);
        assert_eq!(g.declared_edges, 2);
        assert_eq!(g.edges, vec![(0, 1), (2, 1)]);
    }

    #[test]
    fn errors_carry_line_and_column() {
        let e = parse(b"p edge 3 1\ne 1 4\n").unwrap_err();
        assert_eq!((e.line, e.column), (2, 5));
        assert!(e.message.contains("outside 1..=3"), "{e}");
        let e = parse(b"e 1 2\n").unwrap_err();
        assert_eq!((e.line, e.column), (1, 1));
        let e = parse(b"p edge 3 1\ne 1\n").unwrap_err();
        assert_eq!((e.line, e.column), (2, 4));
        let e = parse(b"p edge x 1\n").unwrap_err();
        assert_eq!((e.line, e.column), (1, 8));
        let e = parse(b"p edge 3 1\nq\n").unwrap_err();
        assert_eq!(e.line, 2);
        let e = parse(b"p edge 3 1\ne 1 2 3\n").unwrap_err();
        assert_eq!((e.line, e.column), (2, 7));
        assert!(parse(b"").is_err());
        assert!(parse(b"p edge 99999999999999999999999 1").is_err());
    }

    #[test]
    fn no_panic_on_arbitrary_bytes() {
        let mut x: u64 = 88172645463325252;
        let alphabet = b"cpe 0123456789\n\r\xff\x00edgecol-";
        for len in 0..300 {
            let mut buf = Vec::new();
            for _ in 0..len {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                buf.push(alphabet[(x % alphabet.len() as u64) as usize]);
            }
            let _ = parse(&buf);
            let mut p = b"p edge 5 3\n".to_vec();
            p.extend_from_slice(&buf);
            let _ = parse(&p);
        }
    }
}
