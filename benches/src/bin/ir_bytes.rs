//! Bytes per instruction of the core's instruction-side columns
//! (`Module::instruction_bytes_in_use`, per column group, and
//! `Module::instruction_storage_bytes`, reserved right after parsing).
//!
//! `cargo run --release -p tusk-benches --bin ir_bytes -- FILE.tusk`
//! (without a file: a generated 200k-instruction module).

use tusk_core::ir::Module;

fn main() {
    let m: Module = match std::env::args().nth(1) {
        Some(path) => {
            let bytes = std::fs::read(&path).expect("readable file");
            tusk_shim::text::parse(&bytes).expect("parses")
        }
        None => tusk_benches::module(200_000, 1),
    };
    let n = m.num_live_insts().max(1);
    let u = m.instruction_bytes_in_use();
    println!(
        "instructions {n}, access patterns {}, pooled dims {}, immediates {}, register operands {}",
        m.num_aps(),
        m.dim_pool().len(),
        m.insts().imms.len(),
        m.reg_pool().len()
    );
    let cols = [
        ("opcode, subop, engine, queue, flags", u.inst_kind),
        ("immediates (sparse)", u.imms),
        ("operands", u.operands),
        ("block, prev, next", u.links),
        ("access patterns", u.aps),
        ("multi-dim pool", u.dim_pool),
        ("register operands", u.reg_operands),
    ];
    for (name, bytes) in cols {
        println!("  {name:<36} {:>7.2} B/inst", bytes as f64 / n as f64);
    }
    println!(
        "in use:   {:.2} B per instruction",
        u.total() as f64 / n as f64
    );
    println!(
        "reserved: {:.2} B per instruction (instruction_storage_bytes)",
        m.instruction_storage_bytes() as f64 / n as f64
    );
}
