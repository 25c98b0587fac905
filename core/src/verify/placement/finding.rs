//! What the verifier reports: one [`Finding`] per broken rule, naming the
//! locations, registers and instruction it is about by id, and its
//! [`Display`](core::fmt::Display) through [`Finding::display`], which spells
//! them in the user's names.

use arrayvec::ArrayVec;
use core::fmt;

use crate::ir::types::keyword_enum;
use crate::ir::{DisplayNamed, Entity, Inst, MemLoc, Module, Reg, Space};

/// Which coordinate of a location left its space.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Axis {
    /// The partition range (`base + partitions`).
    Partitions,
    /// The byte range (`offset + bytes`; DRAM: `offset + partitions × bytes`).
    Bytes,
}

keyword_enum! {
    /// One broken rule. Every variant names the location(s) or register(s) it is
    /// about; conflicts also name an instruction where both are live (its id and
    /// its position in program order). Print with [`Finding::display`]. Its
    /// [`Finding::kind`] (`overlap`, `out-of-bounds`, ...) is the word used by
    /// `; expect:` lines of the broken examples.
    #[derive(Copy, Clone, Debug, PartialEq, Eq)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub enum Finding, "finding": kind {
        /// A live location has no placement.
        Unplaced => "unplaced" {
            /// The location.
            mem: MemLoc,
            /// The first instruction where it is live.
            inst: Inst,
            /// Its position.
            pos: u32,
        },
        /// A location reaches beyond its space.
        OutOfBounds => "out-of-bounds" {
            /// The location.
            mem: MemLoc,
            /// Which coordinate.
            axis: Axis,
            /// One past its last partition or byte.
            end: u64,
            /// The space's limit on that coordinate.
            limit: u64,
        },
        /// A location's offset is not a multiple of its alignment.
        Misaligned => "misaligned" {
            /// The location.
            mem: MemLoc,
            /// Its offset.
            offset: u64,
            /// Its alignment.
            align: u32,
        },
        /// An on-chip location starts on a partition the start rule forbids.
        BadStartPartition => "bad-start-partition" {
            /// The location.
            mem: MemLoc,
            /// Its base partition.
            base: u16,
            /// Its partition count.
            partitions: u16,
            /// The required multiple for that count.
            granularity: u16,
        },
        /// A PSUM location does not start on a bank boundary.
        PsumOffBank => "psum-off-bank-boundary" {
            /// The location.
            mem: MemLoc,
            /// Its offset.
            offset: u64,
            /// Bytes per bank.
            bank_bytes: u32,
        },
        /// A PSUM location spans more consecutive banks than the target allows.
        PsumBankSpan => "psum-bank-crossing" {
            /// The location.
            mem: MemLoc,
            /// First bank touched.
            first_bank: u64,
            /// Last bank touched.
            last_bank: u64,
            /// Banks one tensor may span.
            max_banks: u8,
        },
        /// A PSUM location's bank disagrees with its offset.
        PsumBankMismatch => "psum-bank-mismatch" {
            /// The location.
            mem: MemLoc,
            /// The bank recorded.
            bank: u8,
            /// The bank its offset lies in.
            expected: u64,
        },
        /// Two interfering locations share a cell.
        Overlap => "overlap" {
            /// The location that became live first (or entered the sweep first).
            a: MemLoc,
            /// The other location.
            b: MemLoc,
            /// An instruction where both are live.
            inst: Inst,
            /// Its position.
            pos: u32,
            /// The first shared partition (DRAM: 0).
            partition: u32,
            /// The first shared byte (PSUM: offset in the partition; DRAM: address).
            byte: u64,
        },
        /// A live register has no lane.
        Uncolored => "uncolored" {
            /// The register.
            reg: Reg,
            /// The first instruction where it is live.
            inst: Inst,
            /// Its position.
            pos: u32,
        },
        /// A register's lanes reach beyond `max_regs`.
        LaneOutOfRange => "lane-out-of-range" {
            /// The register.
            reg: Reg,
            /// Its first lane.
            lane: u16,
            /// Its lane count.
            lanes: u8,
            /// Lanes of the register file.
            max_regs: u16,
        },
        /// A 2-lane register starts on an odd lane.
        OddPairLane => "odd-lane-pair" {
            /// The register.
            reg: Reg,
            /// Its first lane.
            lane: u16,
        },
        /// An access pattern reaches, at some iteration of its loops (or
        /// anywhere in its register window), cells outside its location.
        PatternOutside => "pattern-outside" {
            /// The instruction.
            inst: Inst,
            /// Its position.
            pos: u32,
            /// The pattern's operand index (inputs, then outputs).
            operand: u8,
            /// The location.
            mem: MemLoc,
            /// Where the pattern reaches.
            reach: crate::verify::patterns::Reach,
        },
        /// Two interfering registers share a lane.
        LaneConflict => "register-overlap" {
            /// The register that became live first.
            a: Reg,
            /// The other register.
            b: Reg,
            /// An instruction where both are live.
            inst: Inst,
            /// Its position.
            pos: u32,
            /// The first shared lane.
            lane: u16,
        },
    }
}

impl Finding {
    /// The locations the finding is about (one or two).
    pub fn mems(&self) -> ArrayVec<MemLoc, 2> {
        match *self {
            Finding::Unplaced { mem, .. }
            | Finding::OutOfBounds { mem, .. }
            | Finding::Misaligned { mem, .. }
            | Finding::BadStartPartition { mem, .. }
            | Finding::PsumOffBank { mem, .. }
            | Finding::PsumBankSpan { mem, .. }
            | Finding::PsumBankMismatch { mem, .. }
            | Finding::PatternOutside { mem, .. } => [mem].into_iter().collect(),
            Finding::Overlap { a, b, .. } => [a, b].into(),
            _ => ArrayVec::new(),
        }
    }

    /// The registers the finding is about (one or two).
    pub fn regs(&self) -> ArrayVec<Reg, 2> {
        match *self {
            Finding::Uncolored { reg, .. }
            | Finding::LaneOutOfRange { reg, .. }
            | Finding::OddPairLane { reg, .. } => [reg].into_iter().collect(),
            Finding::LaneConflict { a, b, .. } => [a, b].into(),
            _ => ArrayVec::new(),
        }
    }

    /// The instruction the finding names, if any.
    pub fn inst(&self) -> Option<Inst> {
        match *self {
            Finding::Unplaced { inst, .. }
            | Finding::Overlap { inst, .. }
            | Finding::Uncolored { inst, .. }
            | Finding::LaneConflict { inst, .. }
            | Finding::PatternOutside { inst, .. } => Some(inst),
            _ => None,
        }
    }

    /// The entities the finding blames, in the order its message names
    /// them (the first is the one a driver points the user at).
    pub fn blamed(&self) -> ArrayVec<Entity, 3> {
        let mut v = ArrayVec::new();
        let first = match *self {
            // "access pattern N of `<inst>` on %x": the instruction first.
            Finding::PatternOutside { inst, .. } => Some(inst),
            _ => None,
        };
        let rest = self.inst().filter(|&i| Some(i) != first);
        let ids = first
            .map(Entity::Inst)
            .into_iter()
            .chain(self.mems().into_iter().map(Entity::Mem))
            .chain(self.regs().into_iter().map(Entity::Reg))
            .chain(rest.map(Entity::Inst));
        for e in ids {
            // At most three: one pattern's instruction and its location, or
            // two locations (registers) and an instruction.
            let _ = v.try_push(e);
        }
        v
    }
}

crate::ir::display_named!(FindingDisplay for Finding);

/// Spells locations as `%name@SB<p,b>(P x B)` with the names of `m`.
impl DisplayNamed for Finding {
    fn fmt_named(&self, m: &Module, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = |x: MemLoc| m.describe_mem(x);
        let r = |x: Reg| m.describe_reg(x);
        let i = |x: Inst| m.describe_inst(x);
        match *self {
            Finding::Unplaced { mem, inst, pos } => write!(
                f,
                "{} is live at {} (position {pos}) but has no placement",
                d(mem),
                i(inst)
            ),
            Finding::OutOfBounds {
                mem,
                axis,
                end,
                limit,
            } => {
                let space = m.mems().space[mem];
                let what = match (axis, space) {
                    (Axis::Partitions, _) => "partitions",
                    (Axis::Bytes, Space::Sb) => "usable bytes per partition",
                    (Axis::Bytes, Space::Psum) => "usable PSUM bytes per partition (usable banks)",
                    (Axis::Bytes, Space::Dram) => "DRAM bytes",
                };
                write!(
                    f,
                    "Allocated memory out of bound {}: ends at {end}, beyond the {limit} {what} of {space}",
                    d(mem)
                )
            }
            Finding::Misaligned { mem, offset, align } => write!(
                f,
                "{} is misaligned: offset {offset} is not a multiple of its alignment {align}",
                d(mem)
            ),
            Finding::BadStartPartition {
                mem,
                base,
                partitions,
                granularity,
            } => write!(
                f,
                "{} starts at partition {base}, but a tensor of {partitions} partitions must start at a multiple of {granularity}",
                d(mem)
            ),
            Finding::PsumOffBank {
                mem,
                offset,
                bank_bytes,
            } => write!(
                f,
                "{} does not start on a PSUM bank boundary: offset {offset} is not a multiple of the {bank_bytes}-byte bank",
                d(mem)
            ),
            Finding::PsumBankSpan {
                mem,
                first_bank,
                last_bank,
                max_banks,
            } => write!(
                f,
                "{} spans PSUM banks {first_bank}..={last_bank}, but one tensor may span at most {max_banks} bank(s)",
                d(mem)
            ),
            Finding::PsumBankMismatch {
                mem,
                bank,
                expected,
            } => write!(
                f,
                "{} records bank {bank} but its offset lies in bank {expected}",
                d(mem)
            ),
            Finding::Overlap {
                a,
                b,
                inst,
                pos,
                partition,
                byte,
            } => {
                let space = m.mems().space[a];
                write!(f, "{} and {} overlap ", d(a), d(b))?;
                if space.is_on_chip() {
                    write!(f, "at cell {space}<{partition},{byte}>")?;
                } else {
                    write!(f, "at byte {space}<{byte}>")?;
                }
                write!(f, " while both are live at {} (position {pos})", i(inst))
            }
            Finding::Uncolored { reg, inst, pos } => write!(
                f,
                "{} is live at {} (position {pos}) but has no lane",
                r(reg),
                i(inst)
            ),
            Finding::LaneOutOfRange {
                reg,
                lane,
                lanes,
                max_regs,
            } => write!(
                f,
                "{} uses lanes {lane}..{} beyond the {max_regs} lanes of the register file",
                r(reg),
                lane as u32 + lanes as u32
            ),
            Finding::OddPairLane { reg, lane } => write!(
                f,
                "{} is a 64-bit register on odd lane {lane}; a lane pair must start on an even lane",
                r(reg)
            ),
            Finding::PatternOutside {
                inst,
                pos,
                operand,
                mem,
                reach,
            } => {
                let (parts, bytes) = (m.mems().partitions[mem], m.mems().bytes[mem]);
                write!(
                    f,
                    "access pattern {} of {} (position {pos}) on {} ",
                    operand as u32 + 1,
                    i(inst),
                    d(mem)
                )?;
                if reach.flat {
                    write!(
                        f,
                        "reaches flat bytes [{}, {}) over its iterations, outside the location's {}",
                        reach.b0,
                        reach.b1,
                        parts as u64 * bytes as u64
                    )
                } else {
                    write!(
                        f,
                        "reaches partitions [{}, {}) and bytes [{}, {}) over its iterations or register window, outside the location's {parts} partitions x {bytes} bytes",
                        reach.p0, reach.p1, reach.b0, reach.b1
                    )
                }
            }
            Finding::LaneConflict {
                a,
                b,
                inst,
                pos,
                lane,
            } => write!(
                f,
                "{} and {} share lane {lane} while both are live at {} (position {pos})",
                r(a),
                r(b),
                i(inst)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::patterns::Reach;

    #[test]
    fn blamed_follows_the_order_the_message_names() {
        let (a, b) = (MemLoc::new(3), MemLoc::new(5));
        let i = Inst::new(7);
        let overlap = Finding::Overlap {
            a,
            b,
            inst: i,
            pos: 2,
            partition: 0,
            byte: 0,
        };
        assert_eq!(
            overlap.blamed().as_slice(),
            [Entity::Mem(a), Entity::Mem(b), Entity::Inst(i)]
        );
        // "access pattern N of `<inst>` on %x": the instruction first.
        let outside = Finding::PatternOutside {
            inst: i,
            pos: 2,
            operand: 0,
            mem: a,
            reach: Reach {
                p0: 0,
                p1: 1,
                b0: 0,
                b1: 9,
                flat: false,
            },
        };
        assert_eq!(
            outside.blamed().as_slice(),
            [Entity::Inst(i), Entity::Mem(a)]
        );
        let (r, s) = (Reg::new(1), Reg::new(2));
        let lanes = Finding::LaneConflict {
            a: r,
            b: s,
            inst: i,
            pos: 2,
            lane: 0,
        };
        assert_eq!(
            lanes.blamed().as_slice(),
            [Entity::Reg(r), Entity::Reg(s), Entity::Inst(i)]
        );
        let odd = Finding::OddPairLane { reg: r, lane: 3 };
        assert_eq!(odd.blamed().as_slice(), [Entity::Reg(r)]);
    }
}
