//! Operand shapes and element types: the rule each opcode's operands obey.
//!
//! A pattern's *shape* is `[P x N]`: `P` partitions (its partition count)
//! and `N` elements per partition (the product of its dims' counts), of the
//! pattern's element size. Its *type* is its location's element type
//! ([`DType`]); an untyped location (`elem N`, [`DType::Raw`]) matches any
//! type of the same size.
//!
//! | opcode | inputs | output | types |
//! |---|---|---|---|
//! | `load`, `save`, `dma_copy` | one `[P x N]` | one with the same bytes in all, and per partition when `P` is equal (else a reshape of the same bytes) | equal (a DMA does not convert) |
//! | `tensor_copy` | one `[P x N]` | `[P x N]` | any (converts) |
//! | `activation` | `[P x N]`, then optional bias / scale operands `[P x 1]` or `[P x N]` | `[P x N]` | any (converts) |
//! | `tensor_tensor` | two `[P x N]` (a partition broadcast counts as `P`) | `[P x N]` | any (converts) |
//! | `tensor_scalar` | `[P x N]` and a register, or a second input `[P x 1]` | `[P x N]` | any |
//! | `tensor_reduce` | `[P x N]` | `[P x M]`, `M` divides `N` (each output element reduces `N / M` inputs) | any |
//! | `tensor_scan` | `add`: one `[P x N]`; `mul_add`: two | `[P x N]` | any |
//! | `matmul` | stationary `[K x M]`, moving `[K x N]`, optionally the accumulator (the output itself) | PSUM `[M x N]`; `K, M <= 128` (the PE array) | float or untyped inputs, fp32 or untyped output |
//! | `transpose` | SB `[P x F]` | PSUM `[F x P]`, `F <= 128` | output the input's type, fp32, or untyped |
//! | `memset` | none | any | any |
//!
//! The scalar opcodes touch registers (and `spill_store` / `reload` one
//! slot of the register's bytes); their memory operands are not shaped.
//! A violation is a [`ShapeError`] naming the operand and both shapes; the
//! readers report it as an input error at the instruction.

use core::fmt;

use super::module::{Ap, Inst, Module};
use super::types::{DType, Opcode, Space, SubOp};

/// Partitions and elements per partition of a pattern.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Shape {
    /// Partitions.
    pub parts: u32,
    /// Elements per partition.
    pub elems: u64,
    /// Element size in bytes.
    pub elem: u8,
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{} x {}] of {} B", self.parts, self.elems, self.elem)
    }
}

/// What rule an instruction's operands break.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ShapeError {
    /// The opcode takes a different number of inputs or outputs.
    Arity {
        /// What it takes (`"one input and one output"`).
        expected: &'static str,
    },
    /// Two operands' shapes disagree.
    Mismatch {
        /// The rule (`"the output has the input's shape"`).
        rule: &'static str,
        /// The first operand's index (inputs, then outputs) and shape.
        a: (u8, Shape),
        /// The second's.
        b: (u8, Shape),
    },
    /// An operand is larger than the engine takes.
    TooLarge {
        /// The rule.
        rule: &'static str,
        /// The operand and its shape.
        a: (u8, Shape),
        /// The limit.
        limit: u64,
    },
    /// An operand's element type is not one the rule allows.
    Type {
        /// The rule.
        rule: &'static str,
        /// The operand.
        operand: u8,
        /// Its type.
        found: DType,
    },
    /// An operand is in a space the opcode does not take there.
    Space {
        /// The rule.
        rule: &'static str,
        /// The operand.
        operand: u8,
    },
}

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ShapeError::Arity { expected } => write!(f, "takes {expected}"),
            ShapeError::Mismatch { rule, a, b } => write!(
                f,
                "{rule}: operand {} is {} but operand {} is {}",
                a.0 + 1,
                a.1,
                b.0 + 1,
                b.1
            ),
            ShapeError::TooLarge { rule, a, limit } => {
                write!(
                    f,
                    "{rule}: operand {} is {} (the limit is {limit})",
                    a.0 + 1,
                    a.1
                )
            }
            ShapeError::Type {
                rule,
                operand,
                found,
            } => write!(f, "{rule}: operand {} is {found}", operand + 1),
            ShapeError::Space { rule, operand } => write!(f, "{rule} (operand {})", operand + 1),
        }
    }
}

/// The shape of a pattern.
pub fn shape_of(m: &Module, a: Ap) -> Shape {
    Shape {
        parts: m.aps().part_count[a] as u32,
        elems: super::ap::elements(m.ap_dims(a)),
        elem: m.aps().elem_size[a],
    }
}

fn same_types(x: DType, y: DType) -> bool {
    x == y || (x.is_raw() && x.size() == y.size()) || (y.is_raw() && x.size() == y.size())
}

/// Checks instruction `i` against the rule of its opcode (module doc).
pub fn check(m: &Module, i: Inst) -> Result<(), ShapeError> {
    let op = m.insts().opcode[i];
    let o = m.operands(i);
    let (n_in, n_out) = (o.n_in as usize, o.n_out as usize);
    let ins: arrayvec::ArrayVec<Ap, 16> = m.inputs(i).collect();
    let outs: arrayvec::ArrayVec<Ap, 16> = m.outputs(i).collect();
    let sh = |a: Ap| shape_of(m, a);
    let ty = |a: Ap| m.mems().dtype[m.aps().loc[a]];
    let space = |a: Ap| m.mems().space[m.aps().loc[a]];
    let arity = |ok: bool, expected: &'static str| {
        if ok {
            Ok(())
        } else {
            Err(ShapeError::Arity { expected })
        }
    };
    let out_k = |k: usize| (n_in + k) as u8;
    let same = |rule: &'static str, a: (u8, Shape), b: (u8, Shape), elems: bool| {
        let ok = a.1.parts == b.1.parts && (!elems || a.1.elems == b.1.elems);
        if ok {
            Ok(())
        } else {
            Err(ShapeError::Mismatch { rule, a, b })
        }
    };
    // Most element-wise opcodes write a tile of their first input's shape.
    let shaped_as_input =
        |rule: &'static str| same(rule, (0, sh(ins[0])), (out_k(0), sh(outs[0])), true);
    // The PE array (matmul, transpose) writes only into the accumulator.
    let writes_psum = |rule: &'static str| {
        if space(outs[0]) == Space::Psum {
            Ok(())
        } else {
            Err(ShapeError::Space {
                rule,
                operand: out_k(0),
            })
        }
    };
    match op {
        Opcode::Load | Opcode::Save | Opcode::DmaCopy => {
            arity(n_in == 1 && n_out == 1, "one input and one output")?;
            let (a, b) = (ins[0], outs[0]);
            let (sa, sb) = (sh(a), sh(b));
            let bytes = |s: Shape| s.elems.saturating_mul(s.elem as u64);
            let total = |s: Shape| bytes(s).saturating_mul(s.parts as u64);
            if total(sa) != total(sb) || (sa.parts == sb.parts && bytes(sa) != bytes(sb)) {
                return Err(ShapeError::Mismatch {
                    rule: "a DMA moves the same bytes on both sides",
                    a: (0, sa),
                    b: (out_k(0), sb),
                });
            }
            let (ta, tb) = (ty(a), ty(b));
            if ta != tb && !ta.is_raw() && !tb.is_raw() {
                return Err(ShapeError::Type {
                    rule: "a DMA does not convert: both sides have the same element type",
                    operand: out_k(0),
                    found: ty(b),
                });
            }
        }
        Opcode::TensorCopy => {
            arity(n_in == 1 && n_out == 1, "one input and one output")?;
            shaped_as_input("the output has the input's shape")?;
        }
        Opcode::Activation => {
            arity(
                n_in >= 1 && n_out == 1,
                "an input, optional bias/scale inputs, one output",
            )?;
            let s0 = sh(ins[0]);
            shaped_as_input("the output has the input's shape")?;
            for (k, &a) in ins.iter().enumerate().skip(1) {
                let s = sh(a);
                if s.parts != s0.parts || (s.elems != 1 && s.elems != s0.elems) {
                    return Err(ShapeError::Mismatch {
                        rule: "a bias or scale operand is a column [P x 1] or the input's shape",
                        a: (0, s0),
                        b: (k as u8, s),
                    });
                }
            }
        }
        Opcode::TensorTensor => {
            arity(n_in == 2 && n_out == 1, "two inputs and one output")?;
            same(
                "both inputs have one shape",
                (0, sh(ins[0])),
                (1, sh(ins[1])),
                true,
            )?;
            shaped_as_input("the output has the inputs' shape")?;
        }
        Opcode::TensorScalar => {
            let with_ap = n_in == 2 && o.n_use == 0;
            let with_reg = n_in == 1 && o.n_use >= 1;
            arity(
                (with_ap || with_reg) && n_out == 1,
                "an input and a register (or a [P x 1] column), and one output",
            )?;
            let s0 = sh(ins[0]);
            shaped_as_input("the output has the input's shape")?;
            if with_ap {
                let s1 = sh(ins[1]);
                if s1.parts != s0.parts || s1.elems != 1 {
                    return Err(ShapeError::Mismatch {
                        rule: "the scalar operand is a column [P x 1]",
                        a: (0, s0),
                        b: (1, s1),
                    });
                }
            }
        }
        Opcode::TensorReduce => {
            arity(n_in == 1 && n_out == 1, "one input and one output")?;
            let (si, so) = (sh(ins[0]), sh(outs[0]));
            if si.parts != so.parts || so.elems == 0 || si.elems % so.elems != 0 {
                return Err(ShapeError::Mismatch {
                    rule: "a reduction keeps the partitions and divides the elements",
                    a: (0, si),
                    b: (out_k(0), so),
                });
            }
        }
        Opcode::TensorScan => {
            let k = if m.insts().subop[i] == SubOp::MulAdd {
                2
            } else {
                1
            };
            arity(
                n_in == k && n_out == 1,
                "one input (add) or two (mul_add), and one output",
            )?;
            for (j, &a) in ins.iter().enumerate() {
                same(
                    "a scan's operands have one shape",
                    (j as u8, sh(a)),
                    (out_k(0), sh(outs[0])),
                    true,
                )?;
            }
        }
        Opcode::Matmul => {
            arity(
                (n_in == 2 || n_in == 3) && n_out == 1,
                "stationary and moving inputs (and the accumulator), one output",
            )?;
            let (st, mv, out) = (sh(ins[0]), sh(ins[1]), sh(outs[0]));
            let pe = m.target.sb_partitions as u64;
            if st.parts as u64 > pe || st.elems > pe {
                return Err(ShapeError::TooLarge {
                    rule: "the stationary operand [K x M] has K, M <= the PE array",
                    a: (0, st),
                    limit: pe,
                });
            }
            if st.parts != mv.parts {
                return Err(ShapeError::Mismatch {
                    rule: "stationary [K x M] and moving [K x N] share K",
                    a: (0, st),
                    b: (1, mv),
                });
            }
            if out.parts as u64 != st.elems || out.elems != mv.elems {
                return Err(ShapeError::Mismatch {
                    rule: "the output is [M x N] for stationary [K x M] and moving [K x N]",
                    a: (0, st),
                    b: (out_k(0), out),
                });
            }
            writes_psum("a matmul writes PSUM")?;
            if n_in == 3 && m.aps().loc[ins[2]] != m.aps().loc[outs[0]] {
                return Err(ShapeError::Space {
                    rule: "a matmul's third input is its accumulator, the output itself",
                    operand: 2,
                });
            }
            for (k, &a) in ins.iter().take(2).enumerate() {
                let t = ty(a);
                if !(t.is_float() || t.is_raw()) {
                    return Err(ShapeError::Type {
                        rule: "the PE multiplies floating-point operands",
                        operand: k as u8,
                        found: t,
                    });
                }
            }
            let t = ty(outs[0]);
            if !(t == DType::F32 || t.is_raw()) {
                return Err(ShapeError::Type {
                    rule: "a matmul accumulates in fp32",
                    operand: out_k(0),
                    found: t,
                });
            }
        }
        Opcode::Transpose => {
            arity(n_in == 1 && n_out == 1, "one input and one output")?;
            let (si, so) = (sh(ins[0]), sh(outs[0]));
            let pe = m.target.sb_partitions as u64;
            if si.elems > pe {
                return Err(ShapeError::TooLarge {
                    rule: "a transpose takes at most the PE array's width of elements",
                    a: (0, si),
                    limit: pe,
                });
            }
            if so.parts as u64 != si.elems || so.elems != si.parts as u64 {
                return Err(ShapeError::Mismatch {
                    rule: "a transpose of [P x F] is [F x P]",
                    a: (0, si),
                    b: (out_k(0), so),
                });
            }
            writes_psum("a transpose writes PSUM")?;
            let (ti, to) = (ty(ins[0]), ty(outs[0]));
            if !(same_types(ti, to) || to == DType::F32 || to.is_raw()) {
                return Err(ShapeError::Type {
                    rule: "a transpose writes the input's type or fp32",
                    operand: out_k(0),
                    found: to,
                });
            }
        }
        Opcode::Memset => arity(n_in == 0 && n_out >= 1, "no input and an output")?,
        _ => {}
    }
    Ok(())
}
