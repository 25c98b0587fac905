//! The function / loop / block tree of a module, recovered from its columns.
//!
//! The module stores loops as block ranges; the text format and JSON nest
//! blocks inside loops. [`walk`] turns the ranges back into a sequence of
//! open / block / close events, iteratively (no recursion), for the printer
//! and the JSON writer. It never panics, whatever the columns hold: a block
//! whose loop is not open where the block stands is emitted at the current
//! nesting (such a module came from the API, not from the parser, which
//! rejects the shapes that cannot be written back).

use tusk_core::ir::{Block, Func, Loop, Module};

/// One step of the tree walk.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A function starts.
    FuncStart(Func),
    /// A loop opens (at nesting `depth`, 0 for an outermost loop).
    LoopOpen(Loop, usize),
    /// A block (inside `depth` loops).
    Block(Block, usize),
    /// The innermost open loop closes (it was at nesting `depth`).
    LoopClose(usize),
    /// The function ends.
    FuncEnd(Func),
}

/// Calls `visit` with every event of the module in order.
pub fn walk(m: &Module, mut visit: impl FnMut(Event)) {
    let n_loops = m.num_loops();
    let mut next_loop = 0usize;
    let mut stack: Vec<Loop> = Vec::with_capacity(m.limits.loop_depth as usize);
    let funcs: Vec<Func> = m.funcs().name.keys().collect();
    for (fi, &f) in funcs.iter().enumerate() {
        let last_func = fi + 1 == funcs.len();
        visit(Event::FuncStart(f));
        stack.clear();
        let fb = m.funcs().first_block[f].index();
        let eb = m.funcs().end_block[f].index().min(m.num_blocks());
        for b in fb..eb {
            while next_loop < n_loops && m.loops().first_block[Loop::new(next_loop)].index() <= b {
                open(m, Loop::new(next_loop), &mut stack, &mut visit);
                next_loop += 1;
            }
            let bl = Block::new(b);
            close_until(m.blocks().loop_[bl], &mut stack, &mut visit);
            visit(Event::Block(bl, stack.len()));
        }
        // Empty loops at the very end (API-built modules only: the parser
        // rejects empty loops). Loops that start a later function stay there.
        while next_loop < n_loops {
            let l = Loop::new(next_loop);
            let fb_l = m.loops().first_block[l].index();
            let empty = m.loops().end_block[l].index() <= fb_l;
            if !(fb_l < eb || (fb_l == eb && (empty || last_func))) {
                break;
            }
            open(m, l, &mut stack, &mut visit);
            next_loop += 1;
        }
        close_until(Loop::INVALID, &mut stack, &mut visit);
        visit(Event::FuncEnd(f));
    }
}

fn open(m: &Module, l: Loop, stack: &mut Vec<Loop>, visit: &mut impl FnMut(Event)) {
    close_until(m.loops().parent[l], stack, visit);
    visit(Event::LoopOpen(l, stack.len()));
    stack.push(l);
}

/// Closes loops until `target` is the innermost open loop (all of them when
/// it is not open at all).
fn close_until(target: Loop, stack: &mut Vec<Loop>, visit: &mut impl FnMut(Event)) {
    if target.is_valid() && !stack.contains(&target) {
        // Not open: keep the current nesting rather than guess.
        return;
    }
    while let Some(&top) = stack.last() {
        if top == target {
            break;
        }
        stack.pop();
        visit(Event::LoopClose(stack.len()));
    }
}
