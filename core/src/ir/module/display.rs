//! How messages spell the module's entities: placed addresses in the
//! reference's spelling, instructions with their operands and where they
//! stand, locations with their address and shape.

use core::fmt;

use super::{Ap, Inst, MemLoc, Module, Reg, NO_LANE, UNPLACED};
use crate::ir::types::{Space, SubOp};

/// A placed address, printed in the reference's spelling.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Address {
    /// Space.
    pub space: Space,
    /// First partition.
    pub base_partition: u16,
    /// Byte offset.
    pub offset: u64,
    /// PSUM bank.
    pub bank: u8,
    /// PSUM bank size, to print the offset inside the bank.
    pub bank_bytes: u32,
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.offset == UNPLACED {
            return write!(f, "{}<?>", self.space.upper());
        }
        match self.space {
            Space::Sb => write!(f, "SB<{},{}>", self.base_partition, self.offset),
            Space::Psum => {
                let in_bank = self.offset % self.bank_bytes.max(1) as u64;
                if in_bank == 0 {
                    write!(f, "PSUM<{},bank {}>", self.base_partition, self.bank)
                } else {
                    write!(
                        f,
                        "PSUM<{},bank {}+{}>",
                        self.base_partition, self.bank, in_bank
                    )
                }
            }
            Space::Dram => write!(f, "DRAM<{}>", self.offset),
        }
    }
}

impl Module {
    /// How messages name an instruction: its text with location and
    /// register names (patterns abbreviated to their location), and where
    /// it stands — `` `%e = activation exp %s, %nmx` (block qtile, 4th) ``.
    pub fn describe_inst(&self, i: Inst) -> InstDescription<'_> {
        InstDescription {
            module: self,
            inst: i,
        }
    }

    /// The `name@SB<p,b>(P x B)` spelling used in messages.
    pub fn describe_mem(&self, m: MemLoc) -> MemDescription<'_> {
        MemDescription {
            module: self,
            mem: m,
        }
    }

    /// The `$name@r5(2 lanes)` spelling used in messages (`r?` while
    /// uncolored).
    pub fn describe_reg(&self, r: Reg) -> RegDescription<'_> {
        RegDescription(self, r)
    }
}

/// See [`Module::describe_reg`].
#[derive(Copy, Clone, Debug)]
pub struct RegDescription<'m>(&'m Module, Reg);

impl fmt::Display for RegDescription<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (m, r) = (self.0, self.1);
        let lanes = m.regs.lanes[r];
        let plural = if lanes == 1 { "lane" } else { "lanes" };
        match m.regs.lane[r] {
            NO_LANE => write!(f, "${}@r?({lanes} {plural})", m.reg_name(r)),
            l => write!(f, "${}@r{l}({lanes} {plural})", m.reg_name(r)),
        }
    }
}

/// See [`Module::describe_inst`].
#[derive(Copy, Clone, Debug)]
pub struct InstDescription<'m> {
    module: &'m Module,
    inst: Inst,
}

impl fmt::Display for InstDescription<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (m, i) = (self.module, self.inst);
        let Some(&op) = m.insts.opcode.get(i) else {
            return write!(f, "{i}");
        };
        let loc = |a: Ap| {
            m.mems
                .name
                .get(m.aps.loc[a])
                .map_or("?", |&n| m.names.get(n))
        };
        let reg = |r: Reg| m.regs.name.get(r).map_or("?", |&n| m.names.get(n));
        f.write_str("`")?;
        let written = m.outputs(i).map(|a| ('%', loc(a)));
        let defined = m.defs(i).iter().map(|&r| ('$', reg(r)));
        if operand_list(f, "", written.chain(defined))? {
            f.write_str(" = ")?;
        }
        f.write_str(op.mnemonic())?;
        let sub = m.insts.subop[i];
        if sub != SubOp::None {
            write!(f, " {}", sub.keyword())?;
        }
        let read = m.inputs(i).map(|a| ('%', loc(a)));
        let used = m.uses(i).iter().map(|&r| ('$', reg(r)));
        operand_list(f, " ", read.chain(used))?;
        f.write_str("`")?;
        let b = m.insts.block[i];
        if b.is_valid() {
            let nth = m.block_insts(b).position(|x| x == i).map_or(0, |k| k + 1);
            let suffix = match (nth % 10, nth % 100) {
                (1, r) if r != 11 => "st",
                (2, r) if r != 12 => "nd",
                (3, r) if r != 13 => "rd",
                _ => "th",
            };
            write!(f, " (block {}, {nth}{suffix})", m.block_name(b))?;
        } else {
            f.write_str(" (removed)")?;
        }
        Ok(())
    }
}

/// Writes `sigil name` items separated by `, `, the first after `lead`;
/// returns whether there was any.
fn operand_list<'a>(
    f: &mut fmt::Formatter<'_>,
    lead: &str,
    items: impl Iterator<Item = (char, &'a str)>,
) -> Result<bool, fmt::Error> {
    let mut any = false;
    for (sigil, name) in items {
        write!(f, "{}{sigil}{name}", if any { ", " } else { lead })?;
        any = true;
    }
    Ok(any)
}

/// `name@SB<p,b>(P x B)`.
#[derive(Copy, Clone, Debug)]
pub struct MemDescription<'m> {
    module: &'m Module,
    mem: MemLoc,
}

impl fmt::Display for MemDescription<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.module;
        write!(
            f,
            "%{}@{}({} x {})",
            m.mem_name(self.mem),
            m.address(self.mem),
            m.mems.partitions[self.mem],
            m.mems.bytes[self.mem]
        )
    }
}

/// A value about a module (a finding, an error, a report) that prints in
/// the module's own names: tensors, instructions and registers as the user
/// wrote them, never internal ids.
pub trait DisplayNamed {
    /// Writes the value, naming what it refers to from `m`.
    fn fmt_named(&self, m: &Module, f: &mut fmt::Formatter<'_>) -> fmt::Result;
}

/// A value with the module whose entities it names, printed through its
/// [`DisplayNamed`]: what each finding's, error's and report's `display(m)`
/// returns. The value itself prints without a module, by index, where it
/// can.
pub struct InModule<'m, T: ?Sized> {
    /// The value printed.
    item: &'m T,
    /// The module that names its entities.
    module: &'m Module,
}

impl<'m, T: ?Sized> InModule<'m, T> {
    /// `item` as `module` spells it.
    pub fn new(item: &'m T, module: &'m Module) -> Self {
        InModule { item, module }
    }
}

impl<T: DisplayNamed + ?Sized> fmt::Display for InModule<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.item.fmt_named(self.module, f)
    }
}

/// A type whose two printed forms, `Display` (no module: entities by
/// index) and [`DisplayNamed`] (the module's names), are one text but for
/// the names, written once (see [`display_named!`]'s `with Display`).
pub(crate) trait WriteNamed {
    /// Writes the value; `m`, when given, names its entities.
    fn write_named(&self, f: &mut fmt::Formatter<'_>, m: Option<&Module>) -> fmt::Result;
}

/// Gives `$ty` its `display(m)`: `$ty` printed with the names of `m`
/// through its [`DisplayNamed`], under the public name `$alias`. With
/// `with Display`, `$ty`'s [`WriteNamed`] writes both `Display` and
/// [`DisplayNamed`]. What the text spells is documented where it is
/// written: the `DisplayNamed` or `WriteNamed` impl.
macro_rules! display_named {
    ($alias:ident for $ty:ident) => {
        impl $ty {
            #[doc = concat!(
                "This ", stringify!($ty), " printed with the names of `m` (see its ",
                "[`DisplayNamed`](crate::ir::DisplayNamed)): tensors, instructions ",
                "and registers as the user wrote them."
            )]
            pub fn display<'m>(&'m self, m: &'m $crate::ir::Module) -> $alias<'m> {
                $crate::ir::InModule::new(self, m)
            }
        }

        #[doc = concat!("See [`", stringify!($ty), "::display`].")]
        pub type $alias<'m> = $crate::ir::InModule<'m, $ty>;
    };
    ($alias:ident for $ty:ident with Display) => {
        $crate::ir::display_named!($alias for $ty);

        impl core::fmt::Display for $ty {
            #[doc = concat!(
                "Without the module: entities by index. A driver prints [`",
                stringify!($ty),
                "::display`] instead, which names them."
            )]
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                $crate::ir::WriteNamed::write_named(self, f, None)
            }
        }

        impl $crate::ir::DisplayNamed for $ty {
            fn fmt_named(
                &self,
                m: &$crate::ir::Module,
                f: &mut core::fmt::Formatter<'_>,
            ) -> core::fmt::Result {
                $crate::ir::WriteNamed::write_named(self, f, Some(m))
            }
        }
    };
}
pub(crate) use display_named;

impl<T: ?Sized> Clone for InModule<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: ?Sized> Copy for InModule<'_, T> {}

impl<T: fmt::Debug + ?Sized> fmt::Debug for InModule<'_, T> {
    /// The value alone: the module is context, too large to print.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("InModule").field(&self.item).finish()
    }
}
