//! The PSUM geometry: a grid of banks × rows. A tensor starts on a bank
//! boundary and takes `ceil(bytes / bank)` consecutive banks (at most
//! `target.psum_max_banks_per_tensor`) of the usable
//! `target.psum_usable_banks`, on its rows.
//!
//! Invariant: bit `b` of `bank_used[r]` is set exactly when a placed
//! tensor holds bank `b` in row `r`; a placed tensor's slot names its first
//! bank and bank count.

use super::{BestFitMemoryManager, Corner, Geometry, ManagerError, Placement, Request, Slot};
use crate::target::Target;

/// Most banks a PSUM geometry may have: a row's banks are the bits of one
/// `u64` mask.
const MAX_BANKS: u32 = u64::BITS;

/// The mask of banks `bank..bank + need` (`bank + need <= MAX_BANKS`).
pub(super) fn bank_mask(bank: u32, need: u32) -> u64 {
    let run = if need >= MAX_BANKS {
        u64::MAX
    } else {
        (1u64 << need) - 1
    };
    run << bank
}

impl BestFitMemoryManager {
    /// Empties the manager as the PSUM of `target`.
    pub fn reset_psum(&mut self, target: &Target, ids: usize) -> Result<(), ManagerError> {
        self.reset_common(Geometry::Psum, ids)?;
        self.set_rows(target, "PSUM", target.psum_partitions)?;
        if target.psum_usable_banks as u32 > MAX_BANKS {
            return Err(ManagerError::Unsupported {
                what: "more PSUM banks than the 64 bits of a row's bank mask",
            });
        }
        self.banks = target.psum_usable_banks as u32;
        self.bank_bytes = target.psum_bank_bytes.max(1) as u64;
        self.max_banks_per_tensor = (target.psum_max_banks_per_tensor as u32).max(1);
        Ok(())
    }

    /// The PSUM placement: over every bank a tensor may start at and every
    /// legal base, the position that opens the fewest wholly free banks
    /// (so that full-width tensors keep finding empty ones), then the
    /// lowest bank.
    pub(super) fn allocate_psum(
        &mut self,
        req: &Request,
    ) -> Result<Option<Placement>, ManagerError> {
        let (k, step) = self.rows_for(req.partitions)?;
        let need = req.bytes.div_ceil(self.bank_bytes) as u32;
        let max = self.max_banks_per_tensor.min(self.banks);
        if req.bytes == 0 || need > max {
            return Err(ManagerError::NeverFits {
                what: "PSUM bytes per partition",
                value: req.bytes,
                max: max as u64 * self.bank_bytes,
            });
        }
        let nbases = self.bases(k, step);
        let used_any = self.bank_used[..self.rows].iter().fold(0u64, |a, &m| a | m);
        let mut best: Option<((u32, u32), u32, usize)> = None;
        for bank in 0..=(self.banks - need) {
            let offset = bank as u64 * self.bank_bytes;
            if offset % req.align.max(1) != 0 {
                continue;
            }
            let m = bank_mask(bank, need);
            for bi in 0..nbases {
                let base = bi * step;
                if (base..base + k).any(|r| self.bank_used[r] & m != 0)
                    || self.hits_obstacle(
                        base,
                        k,
                        offset,
                        offset + need as u64 * self.bank_bytes,
                        req,
                    )
                {
                    continue;
                }
                let fresh = (m & !used_any).count_ones();
                let score = (fresh, bank);
                if best.map_or(true, |(b, _, _)| score < b) {
                    best = Some((score, bank, base));
                }
            }
        }
        let Some((_, bank, base)) = best else {
            return Ok(None);
        };
        self.commit_psum(req, bank, need, base, k);
        Ok(Some(Placement {
            base_partition: base as u16 * self.row_partitions,
            offset: bank as u64 * self.bank_bytes,
            corner: Corner::Bank,
        }))
    }

    pub(super) fn commit_psum(
        &mut self,
        req: &Request,
        bank: u32,
        need: u32,
        base: usize,
        k: usize,
    ) {
        let m = bank_mask(bank, need);
        for r in base..base + k {
            self.bank_used[r] |= m;
        }
        self.slots[req.id as usize] = Slot {
            base_row: base as u8,
            rows: k as u8,
            first_bank: bank,
            banks: need,
        };
        self.peak_bytes = self.peak_bytes.max((bank + need) as u64 * self.bank_bytes);
        self.live_area += need as u64 * self.bank_bytes * k as u64 * self.row_partitions as u64;
    }

    /// [`Self::free`] of a tensor's banks.
    pub(super) fn free_banks(&mut self, slot: &Slot) {
        let (base, k) = (slot.base_row as usize, slot.rows as usize);
        let m = bank_mask(slot.first_bank, slot.banks);
        for r in base..base + k {
            self.bank_used[r] &= !m;
        }
        let bytes = slot.banks as u64 * self.bank_bytes;
        self.live_area = self
            .live_area
            .saturating_sub(bytes * k as u64 * self.row_partitions as u64);
        if self.sample_now() {
            self.quantiles.add(bytes);
        }
    }

    /// The longest run of banks free in every row of `base..base + k`, in
    /// bytes (at most a tensor's bank limit).
    pub(super) fn largest_bank_run(&self, base: usize, k: usize) -> u64 {
        let used = self.bank_used[base..base + k]
            .iter()
            .fold(0u64, |a, &m| a | m);
        let mut run = 0u64;
        let mut longest = 0u64;
        for bank in 0..self.banks {
            if used >> bank & 1 == 0 {
                run += 1;
                longest = longest.max(run);
            } else {
                run = 0;
            }
        }
        longest.min(self.max_banks_per_tensor as u64) * self.bank_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::super::request as req;
    use super::*;

    #[test]
    fn psum_banks() {
        let t = Target {
            psum_usable_banks: 7,
            ..Target::default()
        };
        let mut m = BestFitMemoryManager::new();
        m.reserve(32, 0);
        m.reset_psum(&t, 32).unwrap();
        // Every full-width tensor takes a bank of its own, on a bank boundary.
        for i in 0..7 {
            let p = m.allocate(&req(i, 128, 100, 9)).unwrap().unwrap();
            assert_eq!(p.offset, i as u64 * 2048);
            assert_eq!(p.corner, Corner::Bank);
        }
        assert_eq!(m.allocate(&req(7, 128, 4, 9)).unwrap(), None);
        assert_eq!(m.largest_free(128).bytes, 0);
        m.free(3).unwrap();
        assert_eq!(m.largest_free(128).bytes, 2048);
        let p = m.allocate(&req(7, 32, 4, 9)).unwrap().unwrap();
        assert_eq!(p.offset, 3 * 2048);
        // A second quadrant tensor shares bank 3 on other partitions.
        let p = m.allocate(&req(8, 32, 4, 9)).unwrap().unwrap();
        assert_eq!((p.base_partition, p.offset), (32, 3 * 2048));
        // Over one bank is refused below trn3.
        assert!(matches!(
            m.allocate(&req(9, 128, 2049, 9)),
            Err(ManagerError::NeverFits { .. })
        ));
        // trn3: consecutive banks.
        let t3 = Target::preset(crate::target::Generation::Trn3);
        m.reset_psum(&t3, 32).unwrap();
        m.allocate(&req(0, 128, 100, 9)).unwrap().unwrap();
        let p = m.allocate(&req(1, 128, 3 * 2048, 9)).unwrap().unwrap();
        assert_eq!(p.offset, 2048);
        assert_eq!(m.peak(), 4 * 2048);
    }
}
