//! What the IR refuses to build, and how the refusal reads.

use core::fmt;

#[allow(unused_imports)] // doc links
use super::Limits;
use crate::ir::ap::MAX_DIMS;
#[allow(unused_imports)] // doc links
use crate::ir::pattern;
use crate::ir::pattern::PatternError;
use crate::ir::types::Opcode;

/// Something the IR refused to build.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum IrError {
    /// A limit of [`Limits`] or the reserved workspace was exceeded.
    Full {
        /// What ran out.
        what: &'static str,
        /// The limit.
        limit: u64,
    },
    /// A name was declared twice.
    Duplicate {
        /// What kind of entity.
        what: &'static str,
    },
    /// A name is longer than the name limit.
    NameTooLong,
    /// A shape field is out of range.
    BadShape {
        /// Which field.
        what: &'static str,
        /// The value given.
        value: u64,
        /// The largest legal value.
        max: u64,
    },
    /// An operand refers to something that does not exist or fits badly.
    BadOperand {
        /// Why.
        what: &'static str,
    },
    /// `end_loop` without `begin_loop`, or a loop left open.
    Unbalanced,
    /// An access pattern has more dimensions than the target's engines
    /// take: its DMA limit for a DMA instruction, its compute limit for the
    /// rest.
    TooManyDims {
        /// The instruction.
        opcode: Opcode,
        /// The operand (inputs, then outputs).
        operand: u8,
        /// Its dimensions.
        dims: u8,
        /// The target's limit.
        max: u8,
        /// True for the DMA limit, false for the compute one.
        dma: bool,
    },
    /// The target allows more dimensions per access pattern than an access
    /// pattern can hold ([`MAX_DIMS`]).
    TargetDims {
        /// The target's limit.
        max: u8,
        /// True for the DMA limit, false for the compute one.
        dma: bool,
    },
    /// An access pattern's loop terms, register term or partition step
    /// break the rules of [`pattern`].
    BadPattern {
        /// The operand (inputs, then outputs).
        operand: u8,
        /// What is wrong.
        error: PatternError,
    },
}

impl fmt::Display for IrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IrError::Full { what, limit } => write!(f, "too many {what}: the limit is {limit}"),
            IrError::Duplicate { what } => write!(f, "{what} declared twice"),
            IrError::NameTooLong => {
                write!(
                    f,
                    "name longer than {} bytes",
                    crate::ir::names::MAX_NAME_LEN
                )
            }
            IrError::BadShape { what, value, max } => {
                write!(f, "{what} {value} is out of range (must be 1..={max})")
            }
            IrError::BadOperand { what } => write!(f, "bad operand: {what}"),
            IrError::Unbalanced => f.write_str("unbalanced loop nesting"),
            IrError::TooManyDims {
                opcode,
                operand,
                dims,
                max,
                dma,
            } => write!(
                f,
                "`{}` access pattern {} has {dims} dimensions; {} access patterns have at most \
                 {max} on this target",
                opcode.mnemonic(),
                operand + 1,
                engines(*dma)
            ),
            IrError::TargetDims { max, dma } => write!(
                f,
                "the target allows {max} dimensions per {} access pattern, more than the \
                 {MAX_DIMS} an access pattern can hold",
                engines(*dma)
            ),
            IrError::BadPattern { operand, error } => {
                write!(f, "access pattern {} {error}", operand + 1)
            }
        }
    }
}

impl core::error::Error for IrError {}

/// How a dimension limit names the engines it is about.
fn engines(dma: bool) -> &'static str {
    if dma {
        "DMA"
    } else {
        "compute"
    }
}
