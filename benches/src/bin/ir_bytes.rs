//! Bytes per instruction of the core's instruction-side columns
//! (`Module::instruction_storage_bytes`): reserved right after parsing, and
//! the part in use (lengths × element sizes), with the per-column split.
//!
//! `cargo run --release -p tusk-benches --bin ir_bytes -- FILE.tusk`
//! (without a file: a generated 200k-instruction module).

use tusk_core::ir::Module;

fn used(m: &Module) -> Vec<(&'static str, usize)> {
    let (i, a) = (&m.insts, &m.aps);
    let b = |len: usize, each: usize| len * each;
    use core::mem::size_of_val as sz;
    let ni = i.opcode.len();
    let na = a.loc.len();
    vec![
        (
            "inst opcode",
            b(ni, sz(&i.opcode[tusk_core::ir::Inst::new(0)])),
        ),
        (
            "inst subop",
            b(ni, sz(&i.subop[tusk_core::ir::Inst::new(0)])),
        ),
        (
            "inst engine",
            b(ni, sz(&i.engine[tusk_core::ir::Inst::new(0)])),
        ),
        ("inst queue", b(ni, 1)),
        (
            "inst flags",
            b(ni, sz(&i.flags[tusk_core::ir::Inst::new(0)])),
        ),
        ("inst imm", b(ni, sz(&i.imm[tusk_core::ir::Inst::new(0)]))),
        (
            "inst operands",
            b(ni, sz(&i.operands[tusk_core::ir::Inst::new(0)])),
        ),
        ("inst block+prev+next", b(ni, 12)),
        ("ap loc", b(na, 4)),
        ("ap part_start+count", b(na, 4)),
        ("ap offset", b(na, 4)),
        ("ap elem_size+ndims", b(na, 2)),
        ("ap dims_start", b(na, 4)),
        ("dims", m.dims.len() * 8),
        ("reg operands", m.reg_pool.len() * 4),
    ]
}

fn main() {
    let m = match std::env::args().nth(1) {
        Some(path) => {
            let bytes = std::fs::read(&path).expect("readable file");
            tusk_shim::text::parse(&bytes).expect("parses")
        }
        None => tusk_benches::module(200_000, 1),
    };
    let n = m.num_live_insts().max(1);
    let cols = used(&m);
    let total: usize = cols.iter().map(|c| c.1).sum();
    println!(
        "instructions {n}, access patterns {}, dims {}, register operands {}",
        m.num_aps(),
        m.dims.len(),
        m.reg_pool.len()
    );
    for (name, bytes) in &cols {
        println!("  {name:<22} {:>7.2} B/inst", *bytes as f64 / n as f64);
    }
    println!("in use:   {:.2} B per instruction", total as f64 / n as f64);
    println!(
        "reserved: {:.2} B per instruction (instruction_storage_bytes)",
        m.instruction_storage_bytes() as f64 / n as f64
    );
}
