//! The printer: a [`Module`] out as canonical text.
//!
//! Canonical text is what [`super::parse`] reads back to the same module and
//! what this printer writes again byte for byte: single spaces, two-space
//! indentation per nesting level, labels on every block, defaults omitted,
//! access patterns in their shortest form, placements after `@`.

use std::fmt::Write;

use tusk_core::ir::{
    full_ap, slice_ap, types, Ap, ApSpec, Inst, Module, Opcode, Space, SubOp, NO_LANE,
};

use super::walk::{walk, Event};

/// Appends the decimal form of `v` (itoa: no `fmt` machinery; printing
/// is mostly integers, and `write!` cost several times the digits).
#[inline]
fn num(out: &mut String, v: impl itoa::Integer) {
    out.push_str(itoa::Buffer::new().format(v));
}

/// Prints a module as canonical text.
pub fn print(m: &Module) -> String {
    let mut out = String::with_capacity(64 + m.num_live_insts() * 40 + m.num_mems() * 40);
    print_into(m, &mut out);
    out
}

/// Appends the canonical text of a module to `out`.
pub fn print_into(m: &Module, out: &mut String) {
    print_header(m, out);
    for mem in m.mems().space.keys() {
        print_mem(m, mem, out);
    }
    for r in m.regs().lanes.keys() {
        print_reg(m, r, out);
    }
    walk(m, |e| print_event(m, e, out));
}

/// The `target` line, and the blank line before the declarations.
pub(crate) fn print_header(m: &Module, out: &mut String) {
    print_target(m, out);
    out.push('\n');
    if m.num_mems() + m.num_regs() > 0 {
        out.push('\n');
    }
}

/// The text of the `target` line (no newline).
#[inline]
pub(crate) fn print_target(m: &Module, out: &mut String) {
    out.push_str("target ");
    out.push_str(m.target.generation.name());
    for (k, v) in m.target.overrides() {
        let _ = write!(out, " {k}={v}");
    }
}

/// One register declaration line.
#[inline]
pub(crate) fn print_reg(m: &Module, r: tusk_core::ir::Reg, out: &mut String) {
    print_reg_decl(m, r, out);
    out.push('\n');
}

/// The text of a register declaration (no newline).
#[inline]
pub(crate) fn print_reg_decl(m: &Module, r: tusk_core::ir::Reg, out: &mut String) {
    out.push_str("reg $");
    out.push_str(m.reg_name(r));
    out.push(' ');
    num(out, m.regs().lanes[r]);
    for (f, w) in types::REG_FLAG_WORDS {
        if m.regs().flags[r].contains(f) {
            out.push(' ');
            out.push_str(w);
        }
    }
    if m.regs().lane[r] != NO_LANE {
        out.push_str(" @ r");
        num(out, m.regs().lane[r]);
    }
}

/// The text of one step of the function / loop / block tree (a block with
/// all its instructions).
pub(crate) fn print_event(m: &Module, e: Event, out: &mut String) {
    match e {
        Event::FuncStart(f) => {
            out.push('\n');
            print_func_open(m, f, out);
            out.push('\n');
        }
        Event::LoopOpen(l, depth) => {
            indent(out, depth + 1);
            print_loop_open(m, l, out);
            out.push('\n');
        }
        Event::Block(b, depth) => {
            indent(out, depth);
            print_label(m, b, out);
            out.push('\n');
            for i in m.block_insts(b) {
                indent(out, depth + 1);
                print_inst(m, i, out);
                out.push('\n');
            }
        }
        Event::LoopClose(depth) => {
            indent(out, depth + 1);
            out.push_str("}\n");
        }
        Event::FuncEnd(_) => out.push_str("}\n"),
    }
}

/// `func @name {` (no newline).
#[inline]
pub(crate) fn print_func_open(m: &Module, f: tusk_core::ir::Func, out: &mut String) {
    out.push_str("func @");
    out.push_str(m.func_name(f));
    out.push_str(" {");
}

/// `loop [NAME in] TRIP {` (no newline).
#[inline]
pub(crate) fn print_loop_open(m: &Module, l: tusk_core::ir::Loop, out: &mut String) {
    let trip = m.loops().trip[l];
    out.push_str("loop ");
    if let Some(name) = m.loop_name(l) {
        out.push_str(name);
        out.push_str(" in ");
    }
    if trip == tusk_core::ir::UNKNOWN_TRIP {
        out.push_str("? {");
    } else {
        num(out, trip);
        out.push_str(" {");
    }
}

/// `label:` (no newline).
#[inline]
pub(crate) fn print_label(m: &Module, b: tusk_core::ir::Block, out: &mut String) {
    out.push_str(m.block_name(b));
    out.push(':');
}

/// Two spaces per nesting level.
#[inline]
pub(crate) fn indent(out: &mut String, depth: usize) {
    for _ in 0..depth {
        out.push_str("  ");
    }
}

#[inline]
pub(crate) fn print_mem(m: &Module, mem: tusk_core::ir::MemLoc, out: &mut String) {
    print_mem_decl(m, mem, out);
    out.push('\n');
}

/// The text of a location declaration (no newline).
#[inline]
pub(crate) fn print_mem_decl(m: &Module, mem: tusk_core::ir::MemLoc, out: &mut String) {
    let space = m.mems().space[mem];
    out.push_str(space.keyword());
    out.push_str(" %");
    out.push_str(m.mem_name(mem));
    out.push_str(" [");
    num(out, m.mems().partitions[mem]);
    out.push_str(" x ");
    num(out, m.mems().bytes[mem]);
    out.push(']');
    let elem = m.elem_size(mem);
    match m.mems().dtype[mem].keyword() {
        Some(k) => {
            out.push(' ');
            out.push_str(k);
        }
        None if elem != 1 => {
            out.push_str(" elem ");
            num(out, elem);
        }
        None => {}
    }
    if m.mems().align[mem] != default_align(m, space, elem) {
        out.push_str(" align ");
        num(out, m.mems().align[mem]);
    }
    for (f, w) in types::MEM_FLAG_WORDS {
        if m.mems().flags[mem].contains(f) {
            out.push(' ');
            out.push_str(w);
        }
    }
    if m.is_placed(mem) {
        out.push_str(" @ ");
        push_address(out, m.address(mem));
    }
}

/// A placed location's address, as `Address`'s `Display` spells it.
fn push_address(out: &mut String, a: tusk_core::ir::Address) {
    match a.space {
        Space::Sb => {
            out.push_str("SB<");
            num(out, a.base_partition);
            out.push(',');
            num(out, a.offset);
        }
        Space::Psum => {
            out.push_str("PSUM<");
            num(out, a.base_partition);
            out.push_str(",bank ");
            num(out, a.bank);
            let in_bank = a.offset % a.bank_bytes.max(1) as u64;
            if in_bank != 0 {
                out.push('+');
                num(out, in_bank);
            }
        }
        Space::Dram => {
            out.push_str("DRAM<");
            num(out, a.offset);
        }
    }
    out.push('>');
}

/// The alignment a declaration without `align` gets.
pub fn default_align(m: &Module, space: Space, elem: u8) -> u32 {
    let min = match space {
        Space::Sb => m.target.sb_min_align,
        Space::Psum => m.target.psum_min_align,
        Space::Dram => m.target.dram_min_align,
    };
    min.max(1).max(elem as u32)
}

/// The text of an instruction (no indentation, no newline).
pub(crate) fn print_inst(m: &Module, i: Inst, out: &mut String) {
    let op = m.insts().opcode[i];
    let mut first = true;
    let mut sep = |out: &mut String| {
        if !first {
            out.push_str(", ");
        }
        first = false;
    };
    let mut any_out = false;
    for a in m.outputs(i) {
        sep(out);
        print_ap(m, i, a, out);
        any_out = true;
    }
    for &r in m.defs(i) {
        sep(out);
        out.push('$');
        out.push_str(m.reg_name(r));
        any_out = true;
    }
    if any_out {
        out.push_str(" = ");
    }
    out.push_str(op.mnemonic());
    let sub = m.insts().subop[i];
    if sub != SubOp::None {
        out.push(' ');
        out.push_str(sub.keyword());
    }
    let mut first = true;
    let mut sep = |out: &mut String| {
        out.push_str(if first { " " } else { ", " });
        first = false;
    };
    for a in m.inputs(i) {
        sep(out);
        print_ap(m, i, a, out);
    }
    // Registers a pattern's register term names print there, not here.
    let termed = |k: usize| {
        m.all_aps(i)
            .any(|a| m.ap_ext(a).reg.is_some_and(|r| r.use_index as usize == k))
    };
    for (k, &r) in m.uses(i).iter().enumerate() {
        if termed(k) {
            continue;
        }
        sep(out);
        out.push('$');
        out.push_str(m.reg_name(r));
    }
    let imm = m.imm(i);
    if imm != 0 || matches!(op, Opcode::ScalarImm | Opcode::Memset) {
        sep(out);
        num(out, imm);
    }
    let q = m.insts().queue[i];
    if q != 0 {
        out.push_str(" queue ");
        num(out, q);
    }
    let e = m.insts().engine[i];
    if e != op.default_engine() {
        out.push_str(" engine ");
        out.push_str(e.keyword());
    }
    for (f, w) in types::INST_FLAG_WORDS {
        if m.insts().flags[i].contains(f) {
            out.push(' ');
            out.push_str(w);
        }
    }
}

/// The access pattern as an [`ApSpec`] (to compare with the short forms).
pub fn ap_spec(m: &Module, a: Ap) -> ApSpec {
    let mut dims = arrayvec::ArrayVec::new();
    for d in m.ap_dims(a).iter().take(tusk_core::ir::MAX_DIMS) {
        dims.push(*d);
    }
    ApSpec {
        loc: m.aps().loc[a],
        part_start: m.aps().part_start[a].into(),
        part_count: m.aps().part_count[a].into(),
        offset: m.aps().offset[a],
        elem_size: m.aps().elem_size[a],
        dims,
        ext: m.ap_ext(a).clone(),
    }
}

/// The loop terms of one part (partitions or bytes) of a pattern:
/// ` +S*i` / ` -S*i` (` mod N` after a term that wraps) in the pattern's
/// term order.
fn print_terms(m: &Module, ext: &tusk_core::ir::ApExt, parts: bool, out: &mut String) {
    for t in &ext.terms {
        let v = if parts { t.parts as i64 } else { t.bytes };
        if v == 0 {
            continue;
        }
        out.push_str(if v < 0 { " -" } else { " +" });
        num(out, v.unsigned_abs());
        out.push('*');
        match m.loop_name(t.lp) {
            Some(n) => out.push_str(n),
            // Unnamed loops cannot be referenced in text; the core names
            // every loop a term moves with (see `ir::pattern`).
            None => {
                out.push('l');
                num(out, t.lp.index());
            }
        }
        if t.wraps() {
            out.push_str(" mod ");
            num(out, t.wrap);
        }
    }
}

/// The register term ` +$r[*S] in LO:HI` of a pattern, if it has one.
fn print_reg_term(m: &Module, i: Inst, ext: &tusk_core::ir::ApExt, out: &mut String) {
    let Some(r) = ext.reg else { return };
    out.push_str(" +$");
    if let Some(&reg) = m.uses(i).get(r.use_index as usize) {
        out.push_str(m.reg_name(reg));
    }
    if r.scale != 1 {
        out.push('*');
        num(out, r.scale);
    }
    out.push_str(" in ");
    num(out, r.window_lo);
    out.push(':');
    num(out, r.window_hi);
}

fn print_ap(m: &Module, i: Inst, a: Ap, out: &mut String) {
    let s = ap_spec(m, a);
    out.push('%');
    out.push_str(m.mem_name(s.loc));
    if s.loc.index() >= m.num_mems() {
        return;
    }
    if s == full_ap(m, s.loc) {
        return;
    }
    let ext = &s.ext;
    let p0 = s.part_start as u32;
    let p1 = p0 + s.part_count as u32;
    let partitions = |out: &mut String| {
        out.push_str("[p");
        num(out, p0);
        out.push(':');
        num(out, p1);
        print_terms(m, ext, true, out);
        if let Some(step) = ext.pstep {
            out.push_str(" step ");
            num(out, step);
        }
        out.push_str(", ");
    };
    if let [d] = s.dims.as_slice() {
        if d.stride == 1 {
            let lo = s.offset as u64;
            let hi = lo + d.count as u64 * s.elem_size as u64;
            let mut plain = s.clone();
            plain.ext = Default::default();
            if hi <= u32::MAX as u64
                && slice_ap(m, s.loc, s.part_start, s.part_count, lo as u32, hi as u32) == plain
            {
                partitions(out);
                num(out, lo);
                out.push(':');
                num(out, hi);
                print_terms(m, ext, false, out);
                print_reg_term(m, i, ext, out);
                out.push(']');
                return;
            }
        }
    }
    partitions(out);
    let moves = ext.reg.is_some() || ext.terms.iter().any(|t| t.bytes != 0);
    if s.offset != 0 || moves {
        out.push('+');
        num(out, s.offset);
        print_terms(m, ext, false, out);
        print_reg_term(m, i, ext, out);
        out.push_str(", ");
    }
    if s.elem_size != m.elem_size(s.loc).max(1) {
        out.push('e');
        num(out, s.elem_size);
        out.push_str(", ");
    }
    for (k, d) in s.dims.iter().enumerate() {
        if k > 0 {
            out.push(' ');
        }
        out.push('[');
        num(out, d.stride);
        out.push(',');
        num(out, d.count);
        out.push(']');
    }
    out.push(']');
}
