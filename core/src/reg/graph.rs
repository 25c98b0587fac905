//! The interference graph of the register colorer: N nodes, each 1 or 2
//! lanes wide, with compressed sparse rows (CSR) of neighbours.
//!
//! Why CSR and not bitset rows: a dense bitset costs N²/8 bytes (1.25 GB at
//! 100k registers), while register interference graphs are sparse (a node
//! meets at most the registers live across its range). The CSR arrays are
//! reserved once ([`InterferenceGraph::with_capacity`] /
//! [`InterferenceGraph::reserve`]); the builders fail with
//! [`GraphError::Full`] instead of growing.
//!
//! Invariants after a build: no self loops, no duplicate neighbours, and the
//! relation is symmetric (`u ∈ nbrs(v) ⇔ v ∈ nbrs(u)`).
//!
//! Which allocator: both. The module allocator (`reg/alloc/`) builds it from
//! live intervals ([`InterferenceGraph::build_from_intervals`]); the CFG
//! allocator (`reg/cfg/`) from the edge list of its dataflow walk and from
//! its coalesced classes' rows.

use crate::reg::reserve_total;
use alloc::vec::Vec;
use core::fmt;

/// Why a graph could not be built.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum GraphError {
    /// The reserved storage is too small.
    Full {
        /// What ran out.
        what: &'static str,
        /// How much the build needs.
        needed: u64,
        /// How much was reserved.
        capacity: u64,
    },
    /// An edge or interval names a node that does not exist, or is malformed.
    BadNode {
        /// The offending node.
        node: u64,
        /// Number of nodes.
        nodes: u64,
    },
}

impl fmt::Display for GraphError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GraphError::Full {
                what,
                needed,
                capacity,
            } => write!(
                f,
                "interference graph: {what} needs {needed} entries but {capacity} are reserved"
            ),
            GraphError::BadNode { node, nodes } => write!(
                f,
                "interference graph: node {node} out of range (the graph has {nodes} nodes)"
            ),
        }
    }
}

impl core::error::Error for GraphError {}

/// An undirected graph with lane weights, stored as CSR rows.
#[derive(Clone, Debug, Default)]
pub struct InterferenceGraph {
    n: usize,
    lanes: Vec<u8>,
    row_start: Vec<u32>,
    row_len: Vec<u32>,
    /// Number of 2-lane neighbours per node (the lane-weighted degree is
    /// `row_len + deg2`).
    deg2: Vec<u32>,
    adj: Vec<u32>,
    /// Build scratch: bucket counters over positions (interval build).
    bucket: Vec<u32>,
    /// Build scratch: nodes in start order / the active set.
    order: Vec<u32>,
    active: Vec<u32>,
}

impl InterferenceGraph {
    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(
            self.lanes,
            self.row_start,
            self.row_len,
            self.deg2,
            self.adj,
            self.bucket,
            self.order,
            self.active
        )
    }

    /// A graph with room for `nodes` nodes and `adjacency` neighbour entries
    /// (twice the number of edges).
    pub fn with_capacity(nodes: usize, adjacency: usize) -> Self {
        let mut g = InterferenceGraph::default();
        g.reserve(nodes, adjacency, 0);
        g
    }

    /// Reserves room for `nodes` nodes, `adjacency` neighbour entries and
    /// `positions` program positions (for [`Self::build_from_intervals`]).
    /// May allocate; call before the pass runs.
    pub fn reserve(&mut self, nodes: usize, adjacency: usize, positions: usize) {
        reserve_totals!(nodes; self.lanes, self.row_len, self.deg2, self.order, self.active);
        reserve_total(&mut self.row_start, nodes + 1);
        reserve_total(&mut self.adj, adjacency);
        reserve_total(&mut self.bucket, positions + 2);
    }

    /// Number of nodes.
    #[inline]
    pub fn num_nodes(&self) -> usize {
        self.n
    }

    /// Number of (undirected) edges.
    pub fn num_edges(&self) -> usize {
        self.row_len.iter().map(|&l| l as usize).sum::<usize>() / 2
    }

    /// Lanes of node `v` (1 or 2).
    #[inline]
    pub fn lanes(&self, v: usize) -> u8 {
        self.lanes[v]
    }

    /// All lane weights.
    #[inline]
    pub fn lane_weights(&self) -> &[u8] {
        &self.lanes
    }

    /// Neighbours of `v`, in no particular order.
    #[inline]
    pub fn neighbors(&self, v: usize) -> &[u32] {
        let s = self.row_start[v] as usize;
        &self.adj[s..s + self.row_len[v] as usize]
    }

    /// Number of neighbours of `v`.
    #[inline]
    pub fn degree(&self, v: usize) -> usize {
        self.row_len[v] as usize
    }

    /// Number of 2-lane neighbours of `v`.
    #[inline]
    pub fn degree2(&self, v: usize) -> usize {
        self.deg2[v] as usize
    }

    /// True when `u` and `v` interfere (scans the shorter row).
    pub fn interferes(&self, u: usize, v: usize) -> bool {
        let (a, b) = if self.degree(u) <= self.degree(v) {
            (u, v)
        } else {
            (v, u)
        };
        self.neighbors(a).contains(&(b as u32))
    }

    fn check_cap<T>(v: &Vec<T>, needed: usize, what: &'static str) -> Result<(), GraphError> {
        if needed > v.capacity() {
            return Err(GraphError::Full {
                what,
                needed: needed as u64,
                capacity: v.capacity() as u64,
            });
        }
        Ok(())
    }

    /// Resets to `lanes.len()` isolated nodes with the given lane weights.
    fn reset(&mut self, lanes: &[u8]) -> Result<(), GraphError> {
        let n = lanes.len();
        Self::check_cap(&self.lanes, n, "nodes")?;
        Self::check_cap(&self.row_start, n + 1, "row starts")?;
        Self::check_cap(&self.row_len, n, "row lengths")?;
        Self::check_cap(&self.deg2, n, "row lengths")?;
        self.n = n;
        self.lanes.clear();
        self.lanes.extend_from_slice(lanes);
        self.row_start.clear();
        self.row_start.resize(n + 1, 0);
        self.row_len.clear();
        self.row_len.resize(n, 0);
        self.deg2.clear();
        self.deg2.resize(n, 0);
        // `adj` keeps its length: every slot a row uses is written by the
        // build before it is read, so zero-filling it again on every round
        // (a memset of the whole adjacency) buys nothing.
        Ok(())
    }

    /// `deg2[v]` = 2-lane intervals overlapping `v` (minus `v` itself),
    /// by prefix counts of 2-lane starts and ends.
    fn count_two_lane(&mut self, start: &[u32], end: &[u32], positions: usize) {
        let n = self.n;
        if !self.lanes.contains(&2) {
            return;
        }
        let lanes = &self.lanes;
        count_below(&mut self.bucket, start, end, start, positions, |v| {
            lanes[v] == 2
        });
        for v in 0..n {
            if start[v] <= end[v] {
                self.deg2[v] = self.bucket[end[v] as usize + 1];
            }
        }
        let lanes = &self.lanes;
        count_below(&mut self.bucket, start, end, end, positions, |v| {
            lanes[v] == 2
        });
        for v in 0..n {
            if start[v] <= end[v] {
                let own = (self.lanes[v] == 2) as u32;
                self.deg2[v] -= self.bucket[start[v] as usize] + own;
            }
        }
    }

    /// Turns per-node degrees (in `row_len`) into row starts and sizes the
    /// adjacency array; afterwards `row_len` is zero and acts as a cursor.
    fn layout_rows(&mut self) -> Result<(), GraphError> {
        let mut total: u64 = 0;
        for v in 0..self.n {
            self.row_start[v] = total.min(u32::MAX as u64) as u32;
            total += self.row_len[v] as u64;
            self.row_len[v] = 0;
        }
        if total > u32::MAX as u64 {
            return Err(GraphError::Full {
                what: "adjacency",
                needed: total,
                capacity: self.adj.capacity() as u64,
            });
        }
        self.row_start[self.n] = total as u32;
        Self::check_cap(&self.adj, total as usize, "adjacency")?;
        if self.adj.len() < total as usize {
            self.adj.resize(total as usize, 0);
        }
        Ok(())
    }

    #[inline]
    fn push_edge(&mut self, u: usize, v: usize) {
        let s = self.row_start[u] as usize + self.row_len[u] as usize;
        self.adj[s] = v as u32;
        self.row_len[u] += 1;
        let s = self.row_start[v] as usize + self.row_len[v] as usize;
        self.adj[s] = u as u32;
        self.row_len[v] += 1;
    }

    /// Resets the graph to the nodes of `lanes` and lays out one row per
    /// node with room for its end of every edge of `edges` that is not a
    /// self loop. Fails on an edge naming a node past the last.
    fn layout_edge_rows(&mut self, lanes: &[u8], edges: &[(u32, u32)]) -> Result<(), GraphError> {
        self.reset(lanes)?;
        let n = self.n;
        for &(u, v) in edges {
            for x in [u, v] {
                if x as usize >= n {
                    return Err(GraphError::BadNode {
                        node: x as u64,
                        nodes: n as u64,
                    });
                }
            }
            if u != v {
                self.row_len[u as usize] += 1;
                self.row_len[v as usize] += 1;
            }
        }
        self.layout_rows()
    }

    /// `deg2[v]` = the 2-lane neighbours in `v`'s row, once the rows are
    /// final. Left at the reset's zeros when no node has two lanes.
    fn count_pair_neighbours(&mut self) {
        if !self.lanes.contains(&2) {
            return;
        }
        for v in 0..self.n {
            let s = self.row_start[v] as usize;
            let mut two = 0;
            for &u in &self.adj[s..s + self.row_len[v] as usize] {
                two += (self.lanes[u as usize] == 2) as u32;
            }
            self.deg2[v] = two;
        }
    }

    /// Builds the graph from an edge list (0-based node pairs). Self loops
    /// and repeated edges are dropped.
    pub fn build_from_edges(
        &mut self,
        lanes: &[u8],
        edges: &[(u32, u32)],
    ) -> Result<(), GraphError> {
        self.layout_edge_rows(lanes, edges)?;
        let n = self.n;
        for &(u, v) in edges {
            if u != v {
                self.push_edge(u as usize, v as usize);
            }
        }
        // Sort and deduplicate each row in place; rows keep their start, so
        // a shortened row leaves unused slots behind it.
        for v in 0..n {
            let s = self.row_start[v] as usize;
            let row = &mut self.adj[s..s + self.row_len[v] as usize];
            row.sort_unstable();
            let mut w = 0usize;
            for r in 0..row.len() {
                if r == 0 || row[r] != row[w - 1] {
                    row[w] = row[r];
                    w += 1;
                }
            }
            self.row_len[v] = w as u32;
        }
        self.count_pair_neighbours();
        Ok(())
    }

    /// Builds the graph from an edge list in O(N + E) without sorting:
    /// rows keep the list's order, and repeated edges are dropped by a
    /// per-row stamp (`repeats` false: the caller guarantees there are
    /// none, and the stamp pass is skipped). Self loops are dropped. The
    /// neighbour order differs from [`Self::build_from_edges`] (which
    /// sorts), so this is for callers that do not depend on it.
    pub fn build_from_edges_unsorted(
        &mut self,
        lanes: &[u8],
        edges: &[(u32, u32)],
        repeats: bool,
    ) -> Result<(), GraphError> {
        self.layout_edge_rows(lanes, edges)?;
        let n = self.n;
        // The fill with the rows split-borrowed, so the loop, which touches
        // every edge twice, keeps them in registers.
        let (row_start, row_len, adj) = (&self.row_start, &mut self.row_len, &mut self.adj);
        for &(u, v) in edges {
            if u != v {
                let (u, v) = (u as usize, v as usize);
                let cu = row_len[u];
                adj[row_start[u] as usize + cu as usize] = v as u32;
                row_len[u] = cu + 1;
                let cv = row_len[v];
                adj[row_start[v] as usize + cv as usize] = u as u32;
                row_len[v] = cv + 1;
            }
        }
        if repeats {
            Self::check_cap(&self.order, n, "order")?;
            self.order.clear();
            self.order.resize(n, u32::MAX);
            for v in 0..n {
                let s = self.row_start[v] as usize;
                let mut w = 0usize;
                for r in 0..self.row_len[v] as usize {
                    let u = self.adj[s + r];
                    if self.order[u as usize] != v as u32 {
                        self.order[u as usize] = v as u32;
                        self.adj[s + w] = u;
                        w += 1;
                    }
                }
                self.row_len[v] = w as u32;
            }
        }
        self.count_pair_neighbours();
        Ok(())
    }

    /// Builds the graph row by row: `row(v, out)` writes the neighbours of
    /// `v` into `out` (room for `bounds[v]`) and returns how many it wrote.
    /// The caller guarantees the rows are symmetric, without self loops or
    /// repeats (a quotient of a symmetric graph, deduplicated per row, is).
    /// One pass over the rows, no edge list.
    pub fn build_from_rows<F>(
        &mut self,
        lanes: &[u8],
        bounds: &[u32],
        mut row: F,
    ) -> Result<(), GraphError>
    where
        F: FnMut(usize, &mut [u32]) -> usize,
    {
        self.reset(lanes)?;
        let n = self.n;
        if bounds.len() != n {
            return Err(GraphError::BadNode {
                node: bounds.len() as u64,
                nodes: n as u64,
            });
        }
        self.row_len[..n].copy_from_slice(bounds);
        self.layout_rows()?;
        for (v, &cap) in bounds.iter().enumerate() {
            let s = self.row_start[v] as usize;
            let cap = cap as usize;
            let len = row(v, &mut self.adj[s..s + cap]).min(cap);
            self.row_len[v] = len as u32;
        }
        self.count_pair_neighbours();
        Ok(())
    }

    /// Builds the interval graph of closed intervals `[start[v], end[v]]`
    /// over program positions `0..positions`: two nodes interfere when
    /// their intervals share a position. Nodes with `start > end` are
    /// absent (no interval, no edge). Runs in O(N + E + positions) with a
    /// sweep in start order and no sorting.
    pub fn build_from_intervals(
        &mut self,
        lanes: &[u8],
        start: &[u32],
        end: &[u32],
        positions: usize,
    ) -> Result<(), GraphError> {
        self.reset(lanes)?;
        let n = self.n;
        if start.len() != n || end.len() != n {
            return Err(GraphError::BadNode {
                node: start.len().max(end.len()) as u64,
                nodes: n as u64,
            });
        }
        for v in 0..n {
            if start[v] <= end[v] && end[v] as usize >= positions {
                return Err(GraphError::BadNode {
                    node: v as u64,
                    nodes: n as u64,
                });
            }
        }
        Self::check_cap(&self.bucket, positions + 2, "positions")?;
        Self::check_cap(&self.order, n, "order")?;
        // Degrees: deg(v) = #{u : s_u <= e_v} - #{u : e_u < s_v} - 1.
        count_below(&mut self.bucket, start, end, start, positions, |_| true);
        // bucket[p] = #{s_u < p}; so #{s_u <= e_v} = bucket[e_v + 1].
        for v in 0..n {
            if start[v] <= end[v] {
                self.row_len[v] = self.bucket[end[v] as usize + 1];
            }
        }
        // Order nodes by start (counting sort using bucket as cursors).
        self.order.clear();
        self.order.resize(n, u32::MAX);
        for v in 0..n {
            if start[v] <= end[v] {
                let c = &mut self.bucket[start[v] as usize];
                self.order[*c as usize] = v as u32;
                *c += 1;
            }
        }
        let placed = self.bucket[positions] as usize;
        self.order.truncate(placed);
        // Subtract #{e_u < s_v} + 1, with ends counted the same way.
        count_below(&mut self.bucket, start, end, end, positions, |_| true);
        for v in 0..n {
            if start[v] <= end[v] {
                // #{e_u < s_v} = bucket[s_v] after the prefix sum.
                self.row_len[v] -= self.bucket[start[v] as usize] + 1;
            }
        }
        // The same counts restricted to 2-lane nodes give `deg2`.
        self.count_two_lane(start, end, positions);
        self.layout_rows()?;
        // Sweep in start order; the active set keeps intervals that may
        // still overlap later starts and is compacted as it is scanned.
        // The rows are split-borrowed so the inner loop keeps them in
        // registers; `v`'s own cursor stays local until its row is done.
        self.active.clear();
        let (row_start, row_len, adj) = (&self.row_start, &mut self.row_len, &mut self.adj);
        let active = &mut self.active;
        for &v in &self.order {
            let v = v as usize;
            let s = start[v];
            let mut vc = row_start[v] as usize + row_len[v] as usize;
            let mut w = 0usize;
            for r in 0..active.len() {
                let u = active[r];
                if end[u as usize] >= s {
                    active[w] = u;
                    w += 1;
                    let uc = &mut row_len[u as usize];
                    adj[row_start[u as usize] as usize + *uc as usize] = v as u32;
                    *uc += 1;
                    adj[vc] = u;
                    vc += 1;
                }
            }
            row_len[v] = (vc - row_start[v] as usize) as u32;
            active.truncate(w);
            active.push(v as u32);
        }
        Ok(())
    }
}

/// Sets `bucket[p]`, for every `p` in `0..positions + 2`, to the number of
/// present nodes `v` (`start[v] <= end[v]`) with `counted(v)` whose
/// `key[v]` (their start or their end) is below `p`: each key counted one
/// position up, then prefix sums. The interval builds read degrees off it
/// and, with the starts as keys, use it as the cursors of a counting sort.
/// `bucket` has room for `positions + 2` counts (checked by the caller).
#[inline]
fn count_below(
    bucket: &mut Vec<u32>,
    start: &[u32],
    end: &[u32],
    key: &[u32],
    positions: usize,
    counted: impl Fn(usize) -> bool,
) {
    bucket.clear();
    bucket.resize(positions + 2, 0);
    for v in 0..start.len() {
        if start[v] <= end[v] && counted(v) {
            bucket[key[v] as usize + 1] += 1;
        }
    }
    for p in 1..positions + 2 {
        bucket[p] += bucket[p - 1];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges_are_symmetric_and_deduplicated() {
        let mut g = InterferenceGraph::with_capacity(4, 16);
        g.build_from_edges(&[1, 1, 2, 1], &[(0, 1), (1, 0), (1, 2), (2, 2), (3, 1)])
            .unwrap();
        assert_eq!(g.num_edges(), 3);
        assert_eq!(g.neighbors(1), &[0, 2, 3]);
        assert!(g.interferes(2, 1) && g.interferes(1, 2));
        assert!(!g.interferes(0, 2));
        assert_eq!(g.lanes(2), 2);
    }

    #[test]
    fn unsorted_build_matches_the_sorted_one() {
        let edges = [(0, 1), (1, 0), (1, 2), (2, 2), (3, 1), (3, 0), (0, 3)];
        let lanes = [1, 1, 2, 1];
        let mut a = InterferenceGraph::with_capacity(4, 16);
        a.build_from_edges(&lanes, &edges).unwrap();
        let mut b = InterferenceGraph::with_capacity(4, 16);
        b.build_from_edges_unsorted(&lanes, &edges, true).unwrap();
        for v in 0..4 {
            let mut row = b.neighbors(v).to_vec();
            row.sort();
            assert_eq!(row, a.neighbors(v), "row {v}");
            assert_eq!(a.degree2(v), b.degree2(v));
        }
    }

    #[test]
    fn rows_build_a_quotient() {
        // The path 0-1-2-3 with {1, 2} merged into one node: a triangle-free
        // path of three nodes, 2-lane middle node.
        let rows: [&[u32]; 3] = [&[1], &[0, 2], &[1]];
        let mut g = InterferenceGraph::with_capacity(3, 8);
        g.build_from_rows(&[1, 2, 1], &[2, 3, 2], |v, out| {
            out[..rows[v].len()].copy_from_slice(rows[v]);
            rows[v].len()
        })
        .unwrap();
        assert_eq!(g.num_edges(), 2);
        assert_eq!(g.neighbors(1), &[0, 2]);
        assert_eq!((g.degree2(0), g.degree2(1)), (1, 0));
        assert!(matches!(
            g.build_from_rows(&[1, 1], &[1], |_, _| 0),
            Err(GraphError::BadNode { .. })
        ));
    }

    #[test]
    fn reserve_is_respected() {
        let mut g = InterferenceGraph::with_capacity(3, 2);
        let e = g.build_from_edges(&[1, 1, 1], &[(0, 1), (1, 2)]);
        assert!(matches!(e, Err(GraphError::Full { needed: 4, .. })));
        let e = g.build_from_edges(&[1, 1, 1], &[(0, 7)]);
        assert!(matches!(e, Err(GraphError::BadNode { node: 7, .. })));
    }

    #[test]
    fn intervals_match_pairwise_overlap() {
        // A fixed pseudo-random family of intervals, checked against the
        // quadratic definition.
        let n = 60;
        let mut s = [0u32; 60];
        let mut e = [0u32; 60];
        let mut x: u32 = 12345;
        for v in 0..n {
            x = x.wrapping_mul(1103515245).wrapping_add(12345);
            s[v] = (x >> 8) % 100;
            x = x.wrapping_mul(1103515245).wrapping_add(12345);
            e[v] = s[v] + (x >> 8) % 15;
        }
        e[5] = 0;
        s[5] = 3; // absent node
        let mut lanes = [1u8; 60];
        for v in (0..n).step_by(3) {
            lanes[v] = 2;
        }
        let mut g = InterferenceGraph::default();
        g.reserve(n, n * n, 120);
        g.build_from_intervals(&lanes, &s, &e, 120).unwrap();
        for u in 0..n {
            for v in 0..n {
                let want = u != v && s[u] <= e[u] && s[v] <= e[v] && s[u] <= e[v] && s[v] <= e[u];
                assert_eq!(g.interferes(u, v), want, "{u} {v}");
            }
            assert_eq!(g.degree(u), (0..n).filter(|&v| g.interferes(u, v)).count());
        }
    }
}
