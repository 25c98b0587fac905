//! Changing entities that exist, each through a mutator that keeps the
//! invariants of the module doc: element types and alignment, placements,
//! register renaming, and the rewrites that re-point or reshape an access
//! pattern in place.

use super::*;

impl Module {
    /// Sets an untyped element size ([`DType::Raw`], the `elem N`
    /// spelling) and raises the alignment to it when smaller.
    pub fn set_elem_size(&mut self, m: MemLoc, elem: u8) -> Result<(), IrError> {
        self.set_dtype(m, DType::Raw(elem))
    }

    /// Sets the element type and raises the alignment to its size when
    /// smaller. The bytes per partition must be a multiple of the size
    /// (checked by the readers, which know where the declaration is).
    pub fn set_dtype(&mut self, m: MemLoc, t: DType) -> Result<(), IrError> {
        check_dtype(t)?;
        let elem = t.size();
        self.mems.dtype[m] = t;
        if self.mems.align[m] < elem as u32 {
            self.mems.align[m] = elem as u32;
        }
        Ok(())
    }

    /// Turns a DMA into a `dma_copy` (a rewrite that moves one of its
    /// sides to another space, e.g. an on-chip side into DRAM; the engine
    /// and queue stay). Refuses an instruction that is not a DMA.
    pub fn make_dma_copy(&mut self, i: Inst) -> Result<(), IrError> {
        if !self.insts.opcode[i].is_dma() {
            return Err(IrError::BadOperand {
                what: "a dma_copy made of an instruction that is not a DMA",
            });
        }
        self.insts.opcode[i] = Opcode::DmaCopy;
        Ok(())
    }

    /// Sets the alignment (a power of two).
    pub fn set_align(&mut self, m: MemLoc, align: u32) -> Result<(), IrError> {
        check_align(align)?;
        self.mems.align[m] = align;
        Ok(())
    }

    /// Names a loop's induction variable (what the text prints in loop
    /// terms). The name is interned.
    pub fn set_loop_name(&mut self, l: Loop, name: &str) -> Result<(), IrError> {
        let n = self.intern(name)?;
        self.loops.name[l] = n;
        Ok(())
    }

    /// Sets the bytes per partition of an on-chip location: a rewrite that
    /// gives a tile room for slots used in turn. Refused on DRAM (a DRAM
    /// location's row is its patterns' default partition pitch, so its
    /// size is part of what they address) and for 0. The caller
    /// guarantees that every pattern of the location stays inside (the
    /// verifier checks).
    pub fn set_mem_bytes(&mut self, m: MemLoc, bytes: u32) -> Result<(), IrError> {
        if bytes == 0 || self.mems.space[m] == Space::Dram {
            return Err(IrError::BadOperand {
                what: "a size of 0 bytes, or a new size for a DRAM location",
            });
        }
        self.mems.bytes[m] = bytes;
        Ok(())
    }

    /// Places a location (no checks: the verifier judges placements).
    pub fn place(&mut self, m: MemLoc, base_partition: u16, offset: u64) {
        self.mems.base_partition[m] = base_partition;
        self.mems.offset[m] = offset;
        self.mems.bank[m] = match self.mems.space[m] {
            Space::Psum if self.target.psum_bank_bytes > 0 => {
                (offset / self.target.psum_bank_bytes as u64).min(NO_BANK as u64 - 1) as u8
            }
            _ => NO_BANK,
        };
    }

    /// Forgets a placement.
    pub fn unplace(&mut self, m: MemLoc) {
        self.mems.base_partition[m] = NO_PARTITION;
        self.mems.offset[m] = UNPLACED;
        self.mems.bank[m] = NO_BANK;
    }

    /// Sets a location's flags (no other column depends on them).
    pub fn set_mem_flags(&mut self, m: MemLoc, flags: MemFlags) {
        self.mems.flags[m] = flags;
    }

    /// Sets a register's flags (no other column depends on them).
    pub fn set_reg_flags(&mut self, r: Reg, flags: RegFlags) {
        self.regs.flags[r] = flags;
    }

    /// Colors a register: its first physical lane, or [`NO_LANE`] to
    /// uncolor it (no checks, as for [`Module::place`]: the verifier judges
    /// colorings).
    pub fn set_reg_lane(&mut self, r: Reg, lane: u16) {
        self.regs.lane[r] = lane;
    }

    /// Mutable registers of an instruction (uses then defs), for renaming.
    pub fn regs_mut(&mut self, i: Inst) -> &mut [Reg] {
        let o = self.insts.operands[i];
        let s = o.reg_start as usize;
        let e = s + o.n_use as usize + o.n_def as usize;
        self.reg_pool.get_mut(s..e).unwrap_or(&mut [])
    }

    /// Re-points an access pattern to `to`, its cells moved by `dpart`
    /// partitions and `dbyte` bytes (negative: onto a copy that holds the
    /// location from some partition and byte on; positive: into a larger
    /// location that holds it at that place): the static part and the
    /// register window move, the loop terms stay (they are relative). The
    /// caller guarantees that every iteration's cells lie inside `to`
    /// (the pattern's extent, moved).
    pub fn shift_ap(&mut self, a: Ap, to: MemLoc, dpart: i32, dbyte: i64) {
        let shift = |x: i64, d: i64, max: i64| x.saturating_add(d).clamp(0, max);
        self.aps.loc[a] = to;
        self.aps.part_start[a] =
            shift(self.aps.part_start[a] as i64, dpart as i64, u8::MAX as i64) as u8;
        self.aps.offset[a] = shift(self.aps.offset[a] as i64, dbyte, u32::MAX as i64) as u32;
        let k = self.aps.ext[a];
        if k != NO_EXT {
            if let Some(r) = self.ap_ext.get_mut(k as usize).and_then(|e| e.reg.as_mut()) {
                r.window_lo = shift(r.window_lo as i64, dbyte, u32::MAX as i64) as u32;
                r.window_hi = shift(r.window_hi as i64, dbyte, u32::MAX as i64) as u32;
            }
        }
    }

    /// Sets the byte offset of an access pattern in place (a rewrite that
    /// moves its static part but not its register window; as for
    /// [`Module::shift_ap`], the caller guarantees that its cells lie inside
    /// the location, which the verifier checks).
    pub fn set_ap_offset(&mut self, a: Ap, offset: u32) {
        self.aps.offset[a] = offset;
    }

    /// Replaces the partition range of an access pattern in place (a
    /// rewrite that narrows or widens the rows it moves). Refuses an empty
    /// range and one the `u8` columns cannot hold; as for
    /// [`Module::shift_ap`], the caller guarantees that the rows lie inside
    /// the location (the verifier checks it).
    pub fn set_ap_partitions(&mut self, a: Ap, start: u16, count: u16) -> Result<(), IrError> {
        let end = start as u64 + count as u64;
        let (what, value) = if count == 0 {
            ("access-pattern partition count", 0)
        } else {
            ("access-pattern partition range end", end)
        };
        if count == 0 || end > MAX_AP_PARTITIONS as u64 {
            return Err(IrError::BadShape {
                what,
                value,
                max: MAX_AP_PARTITIONS as u64,
            });
        }
        self.aps.part_start[a] = start as u8;
        self.aps.part_count[a] = count as u8;
        Ok(())
    }

    /// Replaces the extension of input-then-output operand `k` of
    /// instruction `i` (a rewrite that changes how a pattern moves), with
    /// the checks of [`pattern::check`]. Fails without changing anything
    /// when the pattern would break them or when the pool has no room for
    /// a pattern that had no extension (never grows: pass use).
    pub fn set_ap_ext(&mut self, i: Inst, k: usize, ext: ApExt) -> Result<(), IrError> {
        let Some(a) = self.all_aps(i).nth(k) else {
            return Err(IrError::BadOperand {
                what: "an operand index past the instruction's patterns",
            });
        };
        let inner = self
            .blocks
            .loop_
            .get(self.insts.block[i])
            .copied()
            .unwrap_or(Loop::INVALID);
        let read = k < self.operands(i).n_in as usize;
        let uses = self.uses(i).len();
        pattern::check(self, inner, uses, read, self.ap_plain(a), &ext).map_err(|error| {
            IrError::BadPattern {
                operand: k as u8,
                error,
            }
        })?;
        match (self.aps.ext[a], ext.is_plain()) {
            (NO_EXT, true) => {}
            (NO_EXT, false) => {
                if self.ap_ext.len() == self.ap_ext.capacity() {
                    return Err(IrError::Full {
                        what: "access-pattern extensions in the reserved workspace",
                        limit: self.ap_ext.capacity() as u64,
                    });
                }
                self.ap_ext.push(ext);
                self.aps.ext[a] = (self.ap_ext.len() - 1) as u32;
            }
            (x, true) => {
                // The pool slot stays (unreferenced: ids are never reused),
                // unless it is the last one: a rewrite undone in the order
                // it was made (a trial taken back) then leaves the pool as
                // it found it.
                if x as usize + 1 == self.ap_ext.len() {
                    self.ap_ext.pop();
                }
                self.aps.ext[a] = NO_EXT;
            }
            (x, false) => {
                if let Some(slot) = self.ap_ext.get_mut(x as usize) {
                    *slot = ext;
                }
            }
        }
        Ok(())
    }

    /// Replaces dim `k` of an access pattern in place (a rewrite that
    /// reshapes a pattern without adding one). A count of 0 is refused, as
    /// when the pattern was added: the inline slot of a one-dim pattern uses
    /// count 0 as its "dims are pooled" marker.
    pub fn set_ap_dim(&mut self, a: Ap, k: usize, dim: Dim) -> Result<(), IrError> {
        if dim.count == 0 {
            return Err(IrError::BadShape {
                what: "dimension count",
                value: 0,
                max: u32::MAX as u64,
            });
        }
        let slot = &mut self.aps.dim[a];
        let target = match pooled(slot) {
            None => (k == 0).then_some(slot),
            Some((s, n)) => (k < n).then(|| self.dims.get_mut(s + k)).flatten(),
        };
        match target {
            Some(d) => {
                *d = dim;
                Ok(())
            }
            None => Err(IrError::BadShape {
                what: "dimension index",
                value: k as u64,
                max: self.ap_ndims(a).saturating_sub(1) as u64,
            }),
        }
    }
}

/// An element type a location may have: a power-of-two size up to 16 bytes.
pub(super) fn check_dtype(t: DType) -> Result<(), IrError> {
    let elem = t.size();
    if elem == 0 || !elem.is_power_of_two() || elem > 16 {
        return Err(IrError::BadShape {
            what: "element size",
            value: elem as u64,
            max: 16,
        });
    }
    Ok(())
}

/// An alignment a location may have: a power of two up to 1 MiB.
pub(super) fn check_align(align: u32) -> Result<(), IrError> {
    if align == 0 || !align.is_power_of_two() || align > 1 << 20 {
        return Err(IrError::BadShape {
            what: "alignment",
            value: align as u64,
            max: 1 << 20,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::tests::{ap_spec, one_block};
    use super::*;

    #[test]
    fn set_ap_dim_rewrites_inline_and_pooled_dims_and_refuses_bad_ones() {
        let mut m = Module::new(Target::default());
        let t = m.add_mem("t", Space::Sb, 128, 4096).unwrap();
        let b = one_block(&mut m);
        let one = [Dim::new(1, 64)];
        let two = [Dim::new(64, 4), Dim::new(1, 8)];
        let ins = [ap_spec(t, 128, &one)];
        let outs = [ap_spec(t, 128, &two)];
        let mut s = InstSpec::new(Opcode::TensorCopy);
        s.inputs = &ins;
        s.outputs = &outs;
        let i = m.append_inst(b, &s).unwrap();
        let (a, o) = (m.inputs(i).next().unwrap(), m.outputs(i).next().unwrap());
        m.set_ap_dim(a, 0, Dim::new(2, 16)).unwrap();
        assert_eq!(m.ap_dims(a), &[Dim::new(2, 16)]);
        m.set_ap_dim(o, 1, Dim::new(1, 4)).unwrap();
        assert_eq!(m.ap_dims(o), &[Dim::new(64, 4), Dim::new(1, 4)]);
        assert!(matches!(
            m.set_ap_dim(a, 0, Dim::new(1, 0)),
            Err(IrError::BadShape {
                what: "dimension count",
                ..
            })
        ));
        assert!(matches!(
            m.set_ap_dim(o, 2, Dim::new(1, 1)),
            Err(IrError::BadShape {
                what: "dimension index",
                value: 2,
                max: 1
            })
        ));
        assert_eq!(m.ap_dims(a), &[Dim::new(2, 16)]);
    }
}
