//! tusk-core on a Cortex-M4: builds a 1,000-instruction kernel with the core's
//! builder in a static heap, runs the analyses and allocation passes that are
//! available, verifies, and prints a report over semihosting. `.ci/run` runs
//! it under QEMU (`cargo run --release` with the runner in .cargo/config.toml)
//! and checks its exit status.
//!
//! Memory comes from one static arena handed to a global allocator; every
//! allocation is counted, so the report shows that the passes allocate
//! nothing once the module and the workspaces are reserved.

#![no_std]
#![no_main]

extern crate alloc;

use core::alloc::{GlobalAlloc, Layout};
use core::sync::atomic::{AtomicUsize, Ordering};

use cortex_m_rt::entry;
use cortex_m_semihosting::{debug, hprintln};
use embedded_alloc::LlffHeap as Heap;

use tusk_core::ir::{
    Builder, Capacity, InstFlags, IrError, MemFlags, Module, Opcode, Space, SubOp,
};
use tusk_core::pass::linear_scan::SPILL_SLACK;
use tusk_core::verify::{DataflowCapacity, DataflowChecker, Verifier};
use tusk_core::{Checks, Clock, Options, Target, Workspace};
use tusk_core::options::{StorageBudget};
use tusk_core::report::{StorageReport};

/// The heap arena: 512 KiB of the board's PSRAM (QEMU's MPS2 boards map it
/// at 0x2100_0000), a fixed memory region the global allocator serves, the
/// size of a Cortex-M-class device's RAM. The module, the input copy and
/// every pass workspace are reserved from it once (the passes then allocate
/// nothing, counted below), and the checks run in it afterwards: a run that
/// needs more fails its allocation, and the firmware with it.
const HEAP_START: usize = 0x2100_0000;
/// Size of the arena.
const HEAP_BYTES: usize = 512 * 1024;

/// A heap that counts allocations, to prove the passes allocate nothing.
struct CountingHeap {
    heap: Heap,
    allocations: AtomicUsize,
}

unsafe impl GlobalAlloc for CountingHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.allocations.fetch_add(1, Ordering::Relaxed);
        let p = unsafe { self.heap.alloc(layout) };
        PEAK.fetch_max(self.heap.used(), Ordering::Relaxed);
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { self.heap.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.allocations.fetch_add(1, Ordering::Relaxed);
        let p = unsafe { self.heap.realloc(ptr, layout, new_size) };
        PEAK.fetch_max(self.heap.used(), Ordering::Relaxed);
        p
    }
}

#[global_allocator]
static HEAP: CountingHeap = CountingHeap {
    heap: Heap::empty(),
    allocations: AtomicUsize::new(0),
};

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    hprintln!("panic: {}", info);
    debug::exit(debug::EXIT_FAILURE);
    loop {
        cortex_m::asm::wfi();
    }
}

/// Builds a tiled kernel of about `tiles * 10` instructions: per tile a load,
/// a matmul into PSUM (stationary `[128 x 128]` weights, moving `[128 x
/// 128]` fp32 tile, a `[128 x 128]` fp32 accumulator), an activation, an
/// add, a save, and scalar address arithmetic.
fn build_kernel(m: &mut Module, tiles: u32) -> Result<(), IrError> {
    let mut b = Builder::new(m);
    let x = b.mem("x", Space::Dram, 128, 512 * tiles, 4, MemFlags::INPUT)?;
    let y = b.mem("y", Space::Dram, 128, 512 * tiles, 4, MemFlags::OUTPUT)?;
    let w = b.mem("w", Space::Dram, 128, 512, 4, MemFlags::INPUT)?;
    let wt = b.mem("wt", Space::Sb, 128, 512, 4, MemFlags::empty())?;
    let i = b.reg("i", 1)?;
    let one = b.reg("one", 1)?;
    let addr = b.reg("addr", 2)?;
    b.func("main")?;
    b.load(wt, w, 0)?;
    b.scalar(Opcode::ScalarImm, SubOp::None, &[i], &[], 0)?;
    b.scalar(Opcode::ScalarImm, SubOp::None, &[one], &[], 1)?;
    let mut name: heapless::String<32> = heapless::String::new();
    for t in 0..tiles {
        let mut mk = |b: &mut Builder<'_>, stem: &str, space: Space, bytes: u32| {
            name.clear();
            let _ = core::fmt::write(&mut name, format_args!("{stem}{t}"));
            b.mem(&name, space, 128, bytes, 4, MemFlags::empty())
        };
        let xt = mk(&mut b, "xt", Space::Sb, 512)?;
        let acc = mk(&mut b, "acc", Space::Psum, 512)?;
        let h = mk(&mut b, "h", Space::Sb, 512)?;
        let o = mk(&mut b, "o", Space::Sb, 512)?;
        let src = [b.slice(x, 0, 128, 512 * t, 512 * (t + 1))];
        let dst = [b.full(xt)];
        let mut spec = tusk_core::ir::InstSpec::new(Opcode::Load);
        spec.inputs = &src;
        spec.outputs = &dst;
        spec.queue = (t % 16) as u8;
        b.inst(&spec)?;
        b.compute(
            Opcode::Matmul,
            SubOp::None,
            acc,
            &[wt, xt],
            InstFlags::empty(),
        )?;
        b.compute(
            Opcode::Activation,
            SubOp::Gelu,
            h,
            &[acc],
            InstFlags::empty(),
        )?;
        b.compute(
            Opcode::TensorTensor,
            SubOp::Add,
            o,
            &[h, xt],
            InstFlags::empty(),
        )?;
        let src = [b.full(o)];
        let dst = [b.slice(y, 0, 128, 512 * t, 512 * (t + 1))];
        let mut spec = tusk_core::ir::InstSpec::new(Opcode::Save);
        spec.inputs = &src;
        spec.outputs = &dst;
        b.inst(&spec)?;
        b.scalar(Opcode::ScalarAlu, SubOp::Add, &[i], &[i, one], 0)?;
        b.scalar(Opcode::ScalarAlu, SubOp::Mul, &[addr], &[i, one], 0)?;
        b.scalar(Opcode::ScalarAlu, SubOp::Add, &[addr], &[addr, one], 0)?;
        b.scalar(Opcode::Branch, SubOp::None, &[], &[addr], 0)?;
    }
    b.finish()
}

#[entry]
fn main() -> ! {
    // SAFETY: called once, before any allocation; the PSRAM region is used by
    // nothing else (the linker places code and statics in SSRAM).
    unsafe { HEAP.heap.init(HEAP_START, HEAP_BYTES) }
    match run() {
        Ok(()) => debug::exit(debug::EXIT_SUCCESS),
        Err(e) => {
            hprintln!("error: {}", e);
            debug::exit(debug::EXIT_FAILURE);
        }
    }
    loop {
        cortex_m::asm::wfi();
    }
}

/// The failure `run` reports once the details are printed.
const FAIL: IrError = IrError::Full {
    what: "a check of the firmware run (see above)",
    limit: 0,
};

/// A fake clock: one tick per reading. QEMU does not model the DWT cycle
/// counter (CYCCNT reads 0), so pass times are in readings, not cycles.
struct TickClock(u64);

impl Clock for TickClock {
    fn now_micros(&mut self) -> u64 {
        self.0 += 1;
        self.0
    }
}

/// High-water mark of the heap in bytes.
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn run() -> Result<(), IrError> {
    let tiles = 110;
    // What `build_kernel` makes (per tile 9 instructions, 12 access
    // patterns of one dim each, 10 register operands, 4 locations), plus a
    // little: a column that overflows its reserve doubles.
    let cap = Capacity {
        insts: tiles as usize * 9 + 16,
        aps: tiles as usize * 12 + 16,
        dims: 0,
        imms: 16,
        // The kernel's patterns do not move.
        ap_exts: 0,
        reg_operands: tiles as usize * 10 + 16,
        mems: tiles as usize * 4 + 16,
        regs: 8,
        blocks: 4,
        loops: 1,
        funcs: 1,
        names: tiles as usize * 4 + 32,
        name_bytes: tiles as usize * 24 + 256,
    };
    let mut m = Module::with_capacity(Target::default(), cap);
    build_kernel(&mut m, tiles)?;
    // The kernel obeys the operand-shape rule the readers enforce.
    for i in m.program_order() {
        if let Err(e) = tusk_core::ir::shape::check(&m, i) {
            hprintln!("the kernel breaks the shape rule at {}: {}", i, e);
            return Err(FAIL);
        }
    }
    let heap_after_build = HEAP.heap.used();

    // The optlevel-8 pipeline: linear scan, DMA optimization, DRAM
    // coloring, register colorer. Checks run after the counted section,
    // against a copy of the input (without the name index it does not use).
    let original = m.read_only_copy();
    let input_copy_bytes = {
        let mut r = StorageReport::new(StorageBudget::UNLIMITED);
        original.storage_parts(&mut r);
        r.total()
    };
    let opts = Options {
        optlevel: 8,
        // The device's budget: the arena holds the input copy the checks
        // compare against and the reservation.
        storage_limit: Some((HEAP_BYTES as u64).saturating_sub(input_copy_bytes)),
        // The device's spill limit. The default (one spill per eight on-chip
        // locations, plus SPILL_SLACK) reserves headroom for 71 spills here,
        // about 130 KB across the module and the workspaces; this kernel's
        // live set takes under 2% of SB and never spills, so the slack
        // alone is kept (a kernel that needs more fails with a message
        // naming the limit).
        lsa_max_spills: Some(SPILL_SLACK),
        // The schedule model's tables (a report figure, not a pass) do not
        // fit the device's arena beside the reservation.
        schedule_model: false,
        ..Options::default()
    };
    let mut ws = Workspace::new();
    // The checks run after the passes, on their own storage (below).
    ws.reserve(&mut m, &opts, Checks::None);
    let heap_after_reserve = HEAP.heap.used();
    let storage = ws.storage();
    hprintln!(
        "  reservation: {} B of a {} B budget",
        storage.total(),
        storage.limit
    );
    for p in &storage.parts {
        hprintln!("  reserved: {} {} B", p.what, p.bytes);
    }
    for k in &storage.skipped {
        hprintln!("  storage: {}", k);
    }
    let mut clock = TickClock(0);
    let before = HEAP.allocations.load(Ordering::Relaxed);
    let report = tusk_core::run(&mut m, &opts, &mut ws, &mut clock, Checks::None);
    let during = HEAP.allocations.load(Ordering::Relaxed) - before;
    let peak_passes = PEAK.load(Ordering::Relaxed);
    let report = match report {
        Ok(r) => r,
        Err(e) => {
            hprintln!("pipeline failed: {}", e.display(&m));
            return Err(FAIL);
        }
    };
    // The passes' storage goes back to the heap before the checks.
    drop(ws);
    // The independent checks (they may allocate: not a pass). The dataflow
    // checker grows each buffer as the check proves it needed, from the
    // module's counts, instead of reserving the worst-case estimate.
    let heap_before_checks = HEAP.heap.used();
    // The high-water mark of the checks alone, from here (the overall one is
    // kept in `peak_all`).
    let peak_all = PEAK.swap(heap_before_checks, Ordering::Relaxed);
    // A clean result has no findings: keep a few, count the rest.
    let mut verifier = Verifier::new();
    verifier.set_max_findings(16);
    let findings = verifier.verify(&m).total();
    drop(verifier);
    let mut checker = DataflowChecker::new();
    let start = DataflowCapacity {
        mismatches: 64,
        ..DataflowCapacity::default()
    };
    let clean = match checker.check_growing(&original, &m, start) {
        Ok(d) => {
            if let Some(x) = d.mismatches.first() {
                hprintln!(
                    "  dataflow: {} mismatch(es), the first: {}",
                    d.mismatches.len() as u64 + d.dropped,
                    x.display(&m)
                );
            }
            d.is_clean()
        }
        Err(e) => {
            hprintln!("dataflow check could not run: {}", e);
            false
        }
    };
    let used = checker.used();
    drop(checker);

    hprintln!(
        "tusk firmware: optlevel {}, {} instructions in, {} locations, {} registers",
        report.optlevel,
        original.num_live_insts(),
        m.num_mems(),
        m.num_regs()
    );
    for p in &report.passes {
        hprintln!("  pass {} ({} ticks)", p.pass.name(), p.micros);
    }
    for s in [Space::Psum, Space::Sb, Space::Dram] {
        let x = report.space(s);
        hprintln!(
            "  {}: peak {} B, lower bound {} B, capacity {} B, spills {} ({} B)",
            s,
            x.peak,
            x.lower_bound,
            x.capacity,
            x.spills,
            x.spill_bytes
        );
    }
    for (k, d) in report.dma.iter().enumerate() {
        if let Some(d) = d {
            hprintln!(
                "  DMA {}: {} DMAs / {} B before, {} DMAs / {} B after",
                if k == 0 { "psum" } else { "sb" },
                d.pre.instructions,
                d.pre.bytes,
                d.post.instructions,
                d.post.bytes
            );
        }
    }
    if let Some(r) = report.reg {
        hprintln!(
            "  REG: {} rounds, {} spilled registers, {} spill instructions, max pressure {}, lane utilization {:.1}%",
            r.rounds,
            r.spilled_registers,
            r.spill_instructions,
            r.max_pressure,
            r.lane_utilization_pct
        );
    }
    let peak_checks = PEAK.load(Ordering::Relaxed);
    hprintln!(
        "  memory: heap {} B after build, {} B after Workspace::reserve, peak {} B through the reservation and the passes, {} B before the checks, peak {} B through the checks, peak heap {} B (checks included) of {} B, instruction columns {} B",
        heap_after_build,
        heap_after_reserve,
        peak_passes,
        heap_before_checks,
        peak_checks,
        peak_all.max(peak_checks),
        HEAP_BYTES,
        m.instruction_storage_bytes()
    );
    hprintln!(
        "  dataflow checker used: {} state runs, {} runs in one read",
        used.runs,
        used.scratch
    );
    hprintln!(
        "  verifier findings: {}, dataflow clean: {}",
        findings,
        clean
    );
    hprintln!("  heap allocations while the passes ran: {}", during);
    if during != 0 || findings != 0 || !clean {
        return Err(FAIL);
    }
    Ok(())
}
