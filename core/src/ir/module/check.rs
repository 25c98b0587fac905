//! The structural check of the module doc's invariants (a test and
//! fuzzing aid: every mutator keeps them).

use super::{Inst, Module};

impl Module {
    /// Checks the structural invariants listed in the module doc.
    pub fn check_structure(&self) -> Result<(), &'static str> {
        let mut count = 0usize;
        for b in self.blocks.name.keys() {
            let mut prev = Inst::INVALID;
            let mut i = self.blocks.first[b];
            while i.is_valid() {
                if self.insts.block[i] != b {
                    return Err("an instruction's block column disagrees with its list");
                }
                if self.insts.prev[i] != prev {
                    return Err("broken prev link");
                }
                prev = i;
                i = self.insts.next[i];
                count += 1;
                if count > self.num_insts() {
                    return Err("cycle in an instruction list");
                }
            }
            if self.blocks.last[b] != prev {
                return Err("a block's last instruction disagrees with its list");
            }
        }
        if count != self.live_insts {
            return Err("linked instruction count disagrees");
        }
        for l in self.loops.trip.keys() {
            let p = self.loops.parent[l];
            if p.is_valid()
                && (self.loops.first_block[l] < self.loops.first_block[p]
                    || self.loops.end_block[l] > self.loops.end_block[p])
            {
                return Err("a loop is not nested in its parent");
            }
        }
        Ok(())
    }
}
