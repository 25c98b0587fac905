//! The small enums and flag sets of the IR: memory spaces, opcodes, engines,
//! and the flags of locations, registers and instructions.

use bitflags::bitflags;
use core::fmt;

/// Declares a fieldless enum whose values each have one text keyword: the
/// enum, `ALL` (every value, in declaration order), the keyword method, its
/// parser back from the keyword and `Display` (the keyword), all from one
/// list of `Variant => "keyword"`, so no value lacks its keyword or is
/// missing from `ALL`. The discriminants are the declaration order.
///
/// An enum whose variants carry fields (`Variant => "keyword" { fields }`)
/// gets the enum and its keyword method only: its values cannot be listed
/// or parsed from a word.
macro_rules! keyword_enum {
    (
        $(#[$m:meta])*
        pub enum $name:ident, $what:literal: $keyword:ident {
            $( $(#[$vm:meta])* $variant:ident => $word:literal { $($fields:tt)* }, )*
        }
    ) => {
        $(#[$m])*
        pub enum $name {
            $( $(#[$vm])* $variant { $($fields)* }, )*
        }

        impl $name {
            #[doc = concat!("The ", stringify!($keyword), " of the ", $what, ".")]
            pub const fn $keyword(&self) -> &'static str {
                match self {
                    $( $name::$variant { .. } => $word, )*
                }
            }
        }
    };
    (
        $(#[$($m:tt)*])*
        pub enum $name:ident, $what:literal: $keyword:ident / $parse:ident {
            $( $(#[$($vm:tt)*])* $variant:ident => $word:literal, )*
        }
    ) => {
        $(#[$($m)*])*
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        #[repr(u8)]
        pub enum $name {
            $( $(#[$($vm)*])* $variant, )*
        }

        impl $name {
            #[doc = concat!("Every ", $what, ", in declaration order.")]
            pub const ALL: [$name; [$(stringify!($variant)),*].len()] = [$($name::$variant),*];

            #[doc = concat!("The text-format ", stringify!($keyword), ".")]
            pub const fn $keyword(self) -> &'static str {
                match self {
                    $( $name::$variant => $word, )*
                }
            }

            #[doc = concat!("Parses the text-format ", stringify!($keyword), ".")]
            pub fn $parse(s: &str) -> Option<$name> {
                $name::ALL.iter().copied().find(|v| v.$keyword() == s)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.$keyword())
            }
        }
    };
}
pub(crate) use keyword_enum;

/// A memory space. The discriminants are the reference's `MemoryType`
/// values (DRAM = 8, SB = 16, PSUM = 32).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum Space {
    /// Device memory behind DMA queues; one flat byte space per core.
    Dram = 8,
    /// The 2-D on-chip scratchpad (partition × byte).
    Sb = 16,
    /// The banked matmul accumulator.
    Psum = 32,
}

impl Space {
    /// Every space, in the order allocators handle them (PSUM first).
    pub const ALL: [Space; 3] = [Space::Psum, Space::Sb, Space::Dram];

    /// The text-format keyword.
    pub const fn keyword(self) -> &'static str {
        match self {
            Space::Dram => "dram",
            Space::Sb => "sb",
            Space::Psum => "psum",
        }
    }

    /// The reference's spelling in addresses and messages.
    pub const fn upper(self) -> &'static str {
        match self {
            Space::Dram => "DRAM",
            Space::Sb => "SB",
            Space::Psum => "PSUM",
        }
    }

    /// Parses the text-format keyword.
    pub fn from_keyword(s: &str) -> Option<Space> {
        match s {
            "dram" => Some(Space::Dram),
            "sb" => Some(Space::Sb),
            "psum" => Some(Space::Psum),
            _ => None,
        }
    }

    /// Dense index 0..3 for per-space arrays (PSUM, SB, DRAM).
    pub const fn slot(self) -> usize {
        match self {
            Space::Psum => 0,
            Space::Sb => 1,
            Space::Dram => 2,
        }
    }

    /// True for the on-chip spaces, whose locations are 2-D rectangles.
    pub const fn is_on_chip(self) -> bool {
        !matches!(self, Space::Dram)
    }
}

impl fmt::Display for Space {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.upper())
    }
}

keyword_enum! {
    /// The engine an instruction runs on.
    pub enum Engine, "engine": keyword / from_keyword {
        /// Tensor engine (matmul).
        Pe => "pe",
        /// Scalar / activation engine.
        Act => "act",
        /// Vector engine.
        Dve => "dve",
        /// GpSimd / pool engine.
        Pool => "pool",
        /// The sequencer: scalar registers, branches, syncs.
        Sp => "sp",
        /// A DMA queue.
        Dma => "dma",
    }
}

keyword_enum! {
    /// What an instruction does. The operand conventions (which access patterns
    /// are read, which written, which registers used and defined) are uniform:
    /// inputs are read, outputs written, uses read, defs written.
    pub enum Opcode, "opcode": mnemonic / from_mnemonic {
        /// DMA DRAM → on-chip (the reference's kind 0x13).
        Load => "load",
        /// DMA on-chip → DRAM (the reference's kind 0x16).
        Save => "save",
        /// DMA between any two locations.
        DmaCopy => "dma_copy",
        /// On-chip copy by a compute engine.
        TensorCopy => "tensor_copy",
        /// Tensor-engine matmul into PSUM.
        Matmul => "matmul",
        /// Activation function on the scalar engine.
        Activation => "activation",
        /// Elementwise op of two tensors.
        TensorTensor => "tensor_tensor",
        /// Elementwise op of a tensor and a scalar register.
        TensorScalar => "tensor_scalar",
        /// Fill a tensor with a constant.
        Memset => "memset",
        /// Scalar register ← immediate.
        ScalarImm => "imm",
        /// Scalar register ← register.
        ScalarMov => "mov",
        /// Scalar register ← ALU op of registers.
        ScalarAlu => "alu",
        /// Register spill: memory slot ← register.
        RegSpillStore => "spill_store",
        /// Register reload: register ← memory slot.
        RegReload => "reload",
        /// Conditional branch on a register (loop back edge).
        Branch => "branch",
        /// Wait on a semaphore / queue, ordering engines.
        SyncWait => "sync_wait",
        /// Reduction of each partition's elements along the free axis (subop
        /// `add`, `max` or `min`) into fewer elements per partition.
        TensorReduce => "tensor_reduce",
        /// Tensor-engine transpose of an SB tile into PSUM (`[P x F]` →
        /// `[F x P]`; the reference lowers it to a matmul with the identity).
        Transpose => "transpose",
        /// A scan along each partition's elements: `add` gives the running sum
        /// of its input; `mul_add` computes `out[i] = a[i] * out[i-1] + b[i]`
        /// (out[-1] = 0) over two inputs.
        TensorScan => "tensor_scan",
    }
}

impl Opcode {
    /// The engine the opcode runs on unless the text says otherwise.
    pub const fn default_engine(self) -> Engine {
        match self {
            Opcode::Load | Opcode::Save | Opcode::DmaCopy => Engine::Dma,
            Opcode::Matmul | Opcode::Transpose => Engine::Pe,
            Opcode::Activation => Engine::Act,
            Opcode::TensorCopy
            | Opcode::TensorTensor
            | Opcode::TensorScalar
            | Opcode::TensorReduce
            | Opcode::TensorScan => Engine::Dve,
            Opcode::Memset => Engine::Pool,
            Opcode::ScalarImm
            | Opcode::ScalarMov
            | Opcode::ScalarAlu
            | Opcode::RegSpillStore
            | Opcode::RegReload
            | Opcode::Branch
            | Opcode::SyncWait => Engine::Sp,
        }
    }

    /// True for instructions that move data through a DMA queue.
    pub const fn is_dma(self) -> bool {
        matches!(self, Opcode::Load | Opcode::Save | Opcode::DmaCopy)
    }

    /// True for the scalar-sequencer instructions that only touch registers
    /// (and, for spill store / reload, one memory slot): those whose engine
    /// is the sequencer, so that the list of them is written once, in
    /// [`Opcode::default_engine`].
    pub const fn is_scalar(self) -> bool {
        matches!(self.default_engine(), Engine::Sp)
    }
}

keyword_enum! {
    /// The sub-operation of `alu` and `activation`, kept in one byte column.
    pub enum SubOp, "sub-operation": keyword / from_keyword {
        /// No sub-operation.
        None => "none",
        /// ALU add.
        Add => "add",
        /// ALU subtract.
        Sub => "sub",
        /// ALU multiply.
        Mul => "mul",
        /// ALU and.
        And => "and",
        /// ALU or.
        Or => "or",
        /// ALU xor.
        Xor => "xor",
        /// ALU shift left.
        Shl => "shl",
        /// ALU shift right.
        Shr => "shr",
        /// ALU / elementwise minimum.
        Min => "min",
        /// ALU / elementwise maximum.
        Max => "max",
        /// Activation: identity.
        Identity => "identity",
        /// Activation: exp.
        Exp => "exp",
        /// Activation: relu.
        Relu => "relu",
        /// Activation: gelu.
        Gelu => "gelu",
        /// Activation: tanh.
        Tanh => "tanh",
        /// Activation: sigmoid.
        Sigmoid => "sigmoid",
        /// Activation: reciprocal square root.
        Rsqrt => "rsqrt",
        /// Activation: square.
        Square => "square",
        /// Activation: natural logarithm.
        Log => "log",
        /// Activation: absolute value.
        Abs => "abs",
        /// Activation: reciprocal.
        Reciprocal => "reciprocal",
        /// Activation: silu (x · sigmoid(x)).
        Silu => "silu",
        /// Activation: square root.
        Sqrt => "sqrt",
        /// Elementwise divide.
        Div => "div",
        /// Scan: `out[i] = a[i] * out[i-1] + b[i]`.
        MulAdd => "mul_add",
    }
}

impl SubOp {
    /// True for the sub-operations of `alu` (integer and bitwise).
    pub const fn is_alu(self) -> bool {
        matches!(
            self,
            SubOp::Add
                | SubOp::Sub
                | SubOp::Mul
                | SubOp::And
                | SubOp::Or
                | SubOp::Xor
                | SubOp::Shl
                | SubOp::Shr
                | SubOp::Min
                | SubOp::Max
        )
    }

    /// True for the activation functions.
    pub const fn is_activation(self) -> bool {
        matches!(
            self,
            SubOp::Identity
                | SubOp::Exp
                | SubOp::Relu
                | SubOp::Gelu
                | SubOp::Tanh
                | SubOp::Sigmoid
                | SubOp::Rsqrt
                | SubOp::Square
                | SubOp::Log
                | SubOp::Abs
                | SubOp::Reciprocal
                | SubOp::Silu
                | SubOp::Sqrt
        )
    }

    /// True when `self` is a sub-operation `op` takes (and `None` for the
    /// opcodes that take none).
    pub const fn fits(self, op: Opcode) -> bool {
        match op {
            Opcode::ScalarAlu => self.is_alu(),
            Opcode::TensorTensor | Opcode::TensorScalar => {
                self.is_alu() || matches!(self, SubOp::Div)
            }
            Opcode::Activation => self.is_activation(),
            Opcode::TensorReduce => matches!(self, SubOp::Add | SubOp::Max | SubOp::Min),
            Opcode::TensorScan => matches!(self, SubOp::Add | SubOp::MulAdd),
            _ => matches!(self, SubOp::None),
        }
    }

    /// The sub-operations `op` takes, space-separated (for messages).
    pub fn list_for(op: Opcode) -> SubOpList {
        SubOpList(op)
    }
}

/// See [`SubOp::list_for`].
#[derive(Copy, Clone, Debug)]
pub struct SubOpList(Opcode);

impl fmt::Display for SubOpList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for s in SubOp::ALL {
            if s != SubOp::None && s.fits(self.0) {
                if !first {
                    f.write_str(" ")?;
                }
                f.write_str(s.keyword())?;
                first = false;
            }
        }
        Ok(())
    }
}

/// An element type: what a location's elements are, with their size.
/// `Raw(n)` is an untyped element of `n` bytes (the `elem N` spelling):
/// any typed access of the same size may read it, and nothing converts
/// into or out of it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DType {
    /// IEEE binary32.
    F32,
    /// bfloat16.
    Bf16,
    /// IEEE binary16.
    F16,
    /// 8-bit float, 4 exponent and 3 mantissa bits.
    F8E4M3,
    /// 8-bit float, 5 exponent and 2 mantissa bits.
    F8E5M2,
    /// 32-bit signed integer.
    I32,
    /// 16-bit signed integer.
    I16,
    /// 8-bit signed integer.
    I8,
    /// 8-bit unsigned integer.
    U8,
    /// An untyped element of this many bytes (1, 2, 4, 8 or 16).
    Raw(u8),
}

impl DType {
    /// The typed element types, in their text order.
    pub const TYPED: [DType; 9] = [
        DType::F32,
        DType::Bf16,
        DType::F16,
        DType::F8E4M3,
        DType::F8E5M2,
        DType::I32,
        DType::I16,
        DType::I8,
        DType::U8,
    ];

    /// Bytes of one element.
    pub const fn size(self) -> u8 {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::Bf16 | DType::F16 | DType::I16 => 2,
            DType::F8E4M3 | DType::F8E5M2 | DType::I8 | DType::U8 => 1,
            DType::Raw(n) => n,
        }
    }

    /// The text keyword of a typed element (`None` for [`DType::Raw`]).
    pub const fn keyword(self) -> Option<&'static str> {
        Some(match self {
            DType::F32 => "fp32",
            DType::Bf16 => "bf16",
            DType::F16 => "fp16",
            DType::F8E4M3 => "fp8e4m3",
            DType::F8E5M2 => "fp8e5m2",
            DType::I32 => "int32",
            DType::I16 => "int16",
            DType::I8 => "int8",
            DType::U8 => "uint8",
            DType::Raw(_) => return None,
        })
    }

    /// Parses a typed element keyword.
    pub fn from_keyword(s: &str) -> Option<DType> {
        DType::TYPED
            .iter()
            .copied()
            .find(|t| t.keyword() == Some(s))
    }

    /// True for the floating-point types.
    pub const fn is_float(self) -> bool {
        matches!(
            self,
            DType::F32 | DType::Bf16 | DType::F16 | DType::F8E4M3 | DType::F8E5M2
        )
    }

    /// True for [`DType::Raw`].
    pub const fn is_raw(self) -> bool {
        matches!(self, DType::Raw(_))
    }

    /// The one-byte code of the type (the column's storage): typed ones
    /// 1..=9, `Raw(n)` as `0x80 | n`.
    pub const fn code(self) -> u8 {
        match self {
            DType::F32 => 1,
            DType::Bf16 => 2,
            DType::F16 => 3,
            DType::F8E4M3 => 4,
            DType::F8E5M2 => 5,
            DType::I32 => 6,
            DType::I16 => 7,
            DType::I8 => 8,
            DType::U8 => 9,
            DType::Raw(n) => 0x80 | n,
        }
    }

    /// The type of a code made by [`DType::code`].
    pub const fn from_code(c: u8) -> DType {
        match c {
            1 => DType::F32,
            2 => DType::Bf16,
            3 => DType::F16,
            4 => DType::F8E4M3,
            5 => DType::F8E5M2,
            6 => DType::I32,
            7 => DType::I16,
            8 => DType::I8,
            9 => DType::U8,
            c => DType::Raw(c & 0x7f),
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.keyword() {
            Some(k) => f.write_str(k),
            None => write!(f, "elem {}", self.size()),
        }
    }
}

/// Declares a flag set: its bits (a `bitflags` struct with the derives of
/// every flag set of the IR) and, in the same list, each flag's text keyword,
/// so that no flag can be added without its word. The n-th flag listed is
/// bit n (a flag beyond the width of the bits does not compile); `$words`
/// lists the flags with their keywords in declaration order, which is the
/// printing order.
macro_rules! flag_set {
    // Numbers the flags: `$out` holds the bitflags constants made so far,
    // `$bit` the position of the next one.
    (@bits $(#[$($m:tt)*])* $name:ident: $bits:ty, [$($out:tt)*] $bit:expr;) => {
        bitflags! {
            $(#[$($m)*])*
            #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
            pub struct $name: $bits {
                $($out)*
            }
        }
    };
    (@bits $(#[$($m:tt)*])* $name:ident: $bits:ty, [$($out:tt)*] $bit:expr;
        $(#[$($fm:tt)*])* $flag:ident $($rest:tt)*
    ) => {
        flag_set! {
            @bits $(#[$($m)*])* $name: $bits, [$($out)* $(#[$($fm)*])* const $flag = 1 << ($bit);]
            $bit + 1; $($rest)*
        }
    };
    (
        $(#[$($m:tt)*])*
        pub struct $name:ident: $bits:ty, keywords in $words:ident {
            $( $(#[$($fm:tt)*])* $flag:ident => $word:literal, )*
        }
    ) => {
        flag_set! { @bits $(#[$($m)*])* $name: $bits, [] 0; $( $(#[$($fm)*])* $flag )* }

        #[doc = concat!("The text keywords of [`", stringify!($name), "`], in printing order.")]
        pub const $words: [($name, &str); [$(stringify!($flag)),*].len()] =
            [$(($name::$flag, $word)),*];
    };
}

flag_set! {
    /// Properties of a memory location.
    pub struct MemFlags: u16, keywords in MEM_FLAG_WORDS {
        /// Holds module input data: defined before the first instruction.
        INPUT => "input",
        /// Holds module output data: live until after the last instruction.
        OUTPUT => "output",
        /// Placed by the user; allocators treat it as an obstacle, never move it.
        PINNED => "pinned",
        /// A spill slot created by an allocator.
        SPILL => "spill",
        /// An internal (compiler-made) tensor, e.g. a DRAM scratch.
        INTERNAL => "internal",
        /// A reload copy created by a spill.
        RELOAD => "reload",
    }
}

flag_set! {
    /// Properties of a scalar register.
    pub struct RegFlags: u8, keywords in REG_FLAG_WORDS {
        /// Bound to a fixed lane by the user; never spilled.
        PINNED => "pinned",
        /// A short-lived temporary made by register spilling; never spilled again.
        SPILL_TEMP => "spilltemp",
    }
}

flag_set! {
    /// Properties of an instruction.
    pub struct InstFlags: u8, keywords in INST_FLAG_WORDS {
        /// May write its output over an input that dies at it.
        IN_PLACE => "inplace",
        /// May read memory that no instruction wrote (`canInstReadFromUninitMem`).
        CAN_READ_UNINIT => "uninit",
        /// A store inserted by a spill.
        SPILL => "spill",
        /// A reload inserted by a spill.
        RELOAD => "reload",
        /// Inserted by an optimization (merged DMA, on-chip copy).
        SYNTHETIC => "synthetic",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The n-th flag of a set is bit n, the numbering `flag_set!` promises.
    #[test]
    fn flags_are_numbered_in_declaration_order() {
        for (n, (flag, _)) in MEM_FLAG_WORDS.iter().enumerate() {
            assert_eq!(flag.bits(), 1 << n, "{flag:?}");
        }
        for (n, (flag, _)) in REG_FLAG_WORDS.iter().enumerate() {
            assert_eq!(flag.bits(), 1 << n, "{flag:?}");
        }
        for (n, (flag, _)) in INST_FLAG_WORDS.iter().enumerate() {
            assert_eq!(flag.bits(), 1 << n, "{flag:?}");
        }
        assert_eq!(MemFlags::RELOAD.bits(), 0b10_0000);
        assert_eq!(InstFlags::SYNTHETIC.bits(), 0b1_0000);
        assert_eq!(RegFlags::SPILL_TEMP.bits(), 0b10);
    }

    /// The scalar instructions are those the sequencer runs.
    #[test]
    fn scalar_opcodes_are_the_sequencers() {
        use Opcode::*;
        for op in [
            ScalarImm,
            ScalarMov,
            ScalarAlu,
            RegSpillStore,
            RegReload,
            Branch,
            SyncWait,
        ] {
            assert!(op.is_scalar(), "{op:?}");
        }
        for op in [
            Load, Save, DmaCopy, Matmul, Activation, TensorCopy, Memset, TensorScan,
        ] {
            assert!(!op.is_scalar(), "{op:?}");
        }
    }
}
