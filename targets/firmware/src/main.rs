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
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicUsize, Ordering};

use cortex_m_rt::entry;
use cortex_m_semihosting::{debug, hprintln};
use embedded_alloc::LlffHeap as Heap;

use tusk_core::analysis::{Bounds, LinearOrder, MemLiveness, RegLiveness};
use tusk_core::ir::{
    Builder, Capacity, InstFlags, IrError, MemFlags, Module, Opcode, Space, SubOp,
};
use tusk_core::Target;

/// Bytes of the static arena the global allocator serves.
const HEAP_BYTES: usize = 2 * 1024 * 1024;

/// A heap that counts allocations, to prove the passes allocate nothing.
struct CountingHeap {
    heap: Heap,
    allocations: AtomicUsize,
}

unsafe impl GlobalAlloc for CountingHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.allocations.fetch_add(1, Ordering::Relaxed);
        unsafe { self.heap.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { self.heap.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.allocations.fetch_add(1, Ordering::Relaxed);
        unsafe { self.heap.realloc(ptr, layout, new_size) }
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
    loop {}
}

/// Builds a tiled kernel of about `tiles * 10` instructions: per tile a load,
/// a matmul into PSUM, an activation, an add, a save, and scalar address
/// arithmetic.
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
        let acc = mk(&mut b, "acc", Space::Psum, 2048)?;
        let h = mk(&mut b, "h", Space::Sb, 2048)?;
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
    {
        static mut ARENA: [MaybeUninit<u8>; HEAP_BYTES] = [MaybeUninit::uninit(); HEAP_BYTES];
        // SAFETY: called once, before any allocation; the arena is only ever
        // reached through the allocator.
        #[allow(static_mut_refs)]
        unsafe {
            HEAP.heap.init(ARENA.as_mut_ptr() as usize, HEAP_BYTES)
        }
    }
    match run() {
        Ok(()) => debug::exit(debug::EXIT_SUCCESS),
        Err(e) => {
            hprintln!("error: {}", e);
            debug::exit(debug::EXIT_FAILURE);
        }
    }
    loop {}
}

fn run() -> Result<(), IrError> {
    let tiles = 110;
    let cap = Capacity {
        insts: tiles as usize * 10 + 16,
        aps: tiles as usize * 10 + 16,
        dims: tiles as usize * 10 + 16,
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
    let heap_after_build = HEAP.heap.used();

    // Workspaces reserved once.
    let mut order = LinearOrder::new();
    let mut live = MemLiveness::new();
    let mut regs = RegLiveness::new();
    let mut bounds = Bounds::new();
    order.compute(&m);
    live.compute(&m, &order);
    regs.compute(&m, &order);
    bounds.compute(&m, &order, &live);

    // The passes proper: everything below must not allocate.
    let before = HEAP.allocations.load(Ordering::Relaxed);
    order.compute(&m);
    live.compute(&m, &order);
    regs.compute(&m, &order);
    bounds.compute(&m, &order, &live);
    let during = HEAP.allocations.load(Ordering::Relaxed) - before;

    hprintln!(
        "tusk firmware: {} instructions, {} locations, {} registers",
        order.len(),
        m.num_mems(),
        m.num_regs()
    );
    for s in [Space::Psum, Space::Sb, Space::Dram] {
        let b = bounds.space(s);
        hprintln!(
            "  {}: {} live locations, lower bound {} B",
            s,
            b.locations,
            b.lower_bound()
        );
    }
    hprintln!(
        "  memory: heap {} B after build, instruction columns {} B ({} B per instruction)",
        heap_after_build,
        m.instruction_storage_bytes(),
        m.instruction_storage_bytes() / order.len().max(1)
    );
    hprintln!("  heap allocations while the passes ran: {}", during);
    if during != 0 {
        return Err(IrError::Full {
            what: "heap allocations during passes",
            limit: 0,
        });
    }
    Ok(())
}
