//! What the checker reports: values, mismatches and the errors that stop a check.

use core::fmt;

use crate::ir::{Ap, DisplayNamed, Inst, MemLoc, Module, Reg};

/// Where a value was made.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Origin {
    /// Memory nothing wrote.
    Uninit,
    /// A module input location.
    Input(MemLoc),
    /// Output operand `operand` (output access patterns, then defined
    /// registers) of an instruction.
    Def {
        /// The writing instruction.
        inst: Inst,
        /// Its output operand index.
        operand: u8,
    },
    /// The constant a `memset` writes: every element of `elem` bytes holds
    /// `value` as element type `dtype` (a [`crate::ir::DType::code`]), so
    /// two memsets of one constant, type and element size write the same
    /// bytes wherever they run. A value's offset is its byte in the
    /// memset's traversal, and only its place in an element (the offset
    /// modulo `elem`) tells bytes apart ([`Value::same_as`]). Constants
    /// beyond 32 bits are named by their instruction ([`Origin::Def`]).
    Const {
        /// The memset's immediate.
        value: i32,
        /// The element type's code.
        dtype: u8,
        /// Bytes per element of the written pattern.
        elem: u8,
    },
}

// The value states hold an origin per run: it stays two words.
const _: () = assert!(core::mem::size_of::<Origin>() == 8);

/// Byte `offset` of an origin.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Value {
    /// Who made it.
    pub origin: Origin,
    /// Which byte of it.
    pub offset: u64,
}

impl Value {
    /// Uninitialized memory (also: a byte beyond the end of a read).
    pub const UNINIT: Value = Value {
        origin: Origin::Uninit,
        offset: 0,
    };

    /// True when `self` and `other` are the same byte: the same origin and
    /// offset, or, for a constant, the same place in an element.
    pub fn same_as(&self, other: &Value) -> bool {
        if self.origin != other.origin {
            return false;
        }
        match self.origin {
            Origin::Const { elem, .. } => {
                let e = elem.max(1) as u64;
                self.offset % e == other.offset % e
            }
            _ => self.offset == other.offset,
        }
    }
}

/// What an operand reads.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Operand {
    /// A memory location through an access pattern.
    Mem(MemLoc),
    /// A register.
    Reg(Reg),
}

/// A read that sees a different value after the rewrite.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Mismatch {
    /// An original instruction's read operand.
    Read {
        /// The instruction.
        inst: Inst,
        /// Its read operand index (input access patterns, then used registers).
        operand: u8,
        /// What the rewritten operand reads.
        reads: Operand,
        /// 0 on the first walk of the innermost enclosing loop, 1 on the second.
        walk: u8,
        /// The first differing byte, in the operand's traversal order.
        byte: u64,
        /// What the original program read there.
        expected: Value,
        /// What the rewritten program reads there.
        found: Value,
    },
    /// A register term of an original instruction's access pattern was
    /// dropped, added, or changed (its scale, its window's size, or where
    /// the static part sits in the window).
    Term {
        /// The instruction.
        inst: Inst,
        /// The access pattern's operand index (inputs, then outputs).
        operand: u8,
        /// True when the rewrite has no register term there.
        dropped: bool,
    },
    /// A module output holds something else at the end.
    Output {
        /// The output location.
        mem: MemLoc,
        /// The first differing byte (partition × bytes + byte).
        byte: u64,
        /// What the original program left there.
        expected: Value,
        /// What the rewritten program leaves there.
        found: Value,
    },
}

crate::ir::display_named!(MismatchDisplay for Mismatch);

struct ValueDisplay<'m>(&'m Module, Value);

impl fmt::Display for ValueDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        match self.1.origin {
            Origin::Uninit => f.write_str("uninitialized memory"),
            Origin::Input(x) => write!(f, "byte {} of input %{}", self.1.offset, m.mem_name(x)),
            Origin::Def { inst, operand } => {
                write!(
                    f,
                    "byte {} of output {} of {}",
                    self.1.offset,
                    operand as u32 + 1,
                    m.describe_inst(inst)
                )
            }
            Origin::Const { value, dtype, elem } => write!(
                f,
                "byte {} of the constant {value} ({})",
                self.1.offset % elem.max(1) as u64,
                crate::ir::DType::from_code(dtype)
            ),
        }
    }
}

/// Names instructions and locations as the rewritten module `m` does.
impl DisplayNamed for Mismatch {
    fn fmt_named(&self, m: &Module, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Mismatch::Read {
                inst,
                operand,
                reads,
                walk,
                byte,
                expected,
                found,
            } => {
                write!(
                    f,
                    "{} operand {} reading ",
                    m.describe_inst(inst),
                    operand as u32 + 1
                )?;
                match reads {
                    Operand::Mem(x) => write!(f, "{}", m.describe_mem(x))?,
                    Operand::Reg(r) => write!(f, "${}", m.reg_name(r))?,
                }
                if walk > 0 {
                    f.write_str(" (second walk of its loop)")?;
                }
                write!(
                    f,
                    ": byte {byte} holds {} but the original program read {}",
                    ValueDisplay(m, found),
                    ValueDisplay(m, expected)
                )
            }
            Mismatch::Term {
                inst,
                operand,
                dropped,
            } => {
                write!(f, "{}", m.describe_inst(inst))?;
                if dropped {
                    write!(
                        f,
                        " access pattern {}: the rewrite dropped its register offset term",
                        operand as u32 + 1
                    )
                } else {
                    write!(
                        f,
                        " access pattern {}: the rewrite changed its register offset term (added it, or changed its scale or window)",
                        operand as u32 + 1
                    )
                }
            }
            Mismatch::Output {
                mem,
                byte,
                expected,
                found,
            } => write!(
                f,
                "output {} ends holding {} at byte {byte}, but the original program left {}",
                m.describe_mem(mem),
                ValueDisplay(m, found),
                ValueDisplay(m, expected)
            ),
        }
    }
}

/// Why a check could not be completed.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DataflowError {
    /// A buffer is full and could not grow: the heap refused (the checker
    /// grows its storage by doubling), or the loop-nesting stack (sized
    /// from the module's loop count) overflowed on a malformed module.
    Capacity {
        /// Which buffer.
        what: &'static str,
        /// Its reserved size.
        reserved: usize,
    },
    /// The checker's storage grew past the run's storage budget
    /// ([`crate::storage::StorageBudget`]).
    OverBudget {
        /// Heap bytes the checker held.
        bytes: u64,
        /// Its share of the budget.
        limit: u64,
    },
    /// The rewritten module is not a rewrite of the original (it has fewer
    /// locations, registers or instructions).
    NotARewrite {
        /// What is missing.
        what: &'static str,
    },
    /// An original instruction has a different number of read operands.
    OperandsChanged {
        /// The instruction.
        inst: Inst,
        /// Read operands in the original.
        expected: u32,
        /// Read operands after the rewrite.
        found: u32,
    },
    /// Original instructions execute in a different order after the rewrite.
    Reordered {
        /// The instruction the original walk executes next.
        expected: Inst,
        /// The one the rewritten walk executes ([`Inst::INVALID`]: none).
        found: Inst,
    },
    /// An access pattern reaches below byte 0 of its location.
    BadAccess {
        /// The instruction.
        inst: Inst,
        /// The access pattern.
        ap: Ap,
    },
}

crate::ir::display_named!(DataflowErrorDisplay for DataflowError with Display);

/// Spells instructions as the (rewritten) module `m` does when given;
/// original instructions keep their place in a rewrite.
impl crate::ir::WriteNamed for DataflowError {
    fn write_named(&self, f: &mut fmt::Formatter<'_>, m: Option<&Module>) -> fmt::Result {
        let e = self;
        struct I<'m>(Option<&'m Module>, Inst);
        impl fmt::Display for I<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.0 {
                    Some(m) if self.1.index() < m.num_insts() => {
                        write!(f, "{}", m.describe_inst(self.1))
                    }
                    _ => write!(f, "{}", self.1),
                }
            }
        }
        match *e {
            DataflowError::Capacity { what, reserved } => write!(
                f,
                "dataflow checker: {what} needs more than its {reserved} entries and the \
                 heap refused to grow it (or, for loop nesting, the reserve is fixed)"
            ),
            DataflowError::OverBudget { bytes, limit } => write!(
                f,
                "dataflow checker: its storage grew to {bytes} bytes, past its {limit}-byte \
                 share of the storage budget (raise --max-memory)"
            ),
            DataflowError::NotARewrite { what } => {
                write!(
                    f,
                    "dataflow checker: the rewritten module has fewer {what} than the original"
                )
            }
            DataflowError::OperandsChanged {
                inst,
                expected,
                found,
            } => write!(
                f,
                "dataflow checker: {} reads {expected} operands in the original but {found} after the rewrite",
                I(m, inst)
            ),
            DataflowError::Reordered { expected, found } => {
                if found.is_valid() {
                    write!(
                        f,
                        "dataflow checker: the rewrite runs {} where the original runs {} (instructions reordered or moved)",
                        I(m, found),
                        I(m, expected)
                    )
                } else {
                    write!(
                        f,
                        "dataflow checker: {} of the original never runs after the rewrite",
                        I(m, expected)
                    )
                }
            }
            DataflowError::BadAccess { inst, ap } => {
                let k = m.and_then(|m| m.all_aps(inst).position(|a| a == ap));
                match (m, k) {
                    (Some(m), Some(k)) => write!(
                        f,
                        "dataflow checker: access pattern {k} (on %{}) of {} reaches below byte 0 of its location",
                        m.mem_name(m.aps().loc[ap]),
                        I(Some(m), inst)
                    ),
                    _ => write!(
                        f,
                        "dataflow checker: {ap} of {} reaches below byte 0 of its location",
                        I(m, inst)
                    ),
                }
            }
        }
    }
}

impl core::error::Error for DataflowError {}
