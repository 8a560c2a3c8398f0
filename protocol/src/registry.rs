//! Per-struct caches kept out of the tables: what a layer computes from a
//! [`StructSchema`] once (its defaults as values, as wire bytes, its rule
//! table resolved against its fields) is held here, keyed by the table
//! entry's identity, so that the tables stay pure data and each cache lives
//! in the layer that computes it (`value` its default values, `encode` the
//! defaults' wire bytes, `validate` the resolved rules).
//!
//! Every struct reachable from the tables of [`ALL_RELEASES`] gets a dense
//! index, found by the entry's address in a small open-addressing table
//! built on first use; a cache is one lazily filled cell per index. A
//! struct outside the tables (a schema built by hand) is cached on the side,
//! computed once and kept for the life of the process.

use std::sync::{Mutex, OnceLock};

use crate::schema::{StructSchema, ALL_RELEASES};

/// The dense index of every struct of every table, by address.
struct Index {
    /// `64 - log2(slots.len())`: the shift of the multiplicative hash.
    shift: u32,
    /// `(address, index + 1)`; `0` marks an empty slot.
    slots: Box<[(usize, u32)]>,
    /// How many structs the tables hold.
    len: usize,
}

impl Index {
    fn build() -> Index {
        let mut structs: Vec<&'static StructSchema> = Vec::new();
        for r in ALL_RELEASES {
            for s in r.structs() {
                if !structs.iter().any(|o| std::ptr::eq(*o, s)) {
                    structs.push(s);
                }
            }
        }
        let cap = (structs.len() * 4).next_power_of_two().max(8);
        let shift = 64 - cap.trailing_zeros();
        let mut slots = vec![(0usize, 0u32); cap].into_boxed_slice();
        for (i, s) in structs.iter().enumerate() {
            let addr = addr(s);
            let mut at = hash(addr, shift);
            while slots[at].1 != 0 {
                at = (at + 1) & (cap - 1);
            }
            slots[at] = (addr, i as u32 + 1);
        }
        Index { shift, slots, len: structs.len() }
    }

    #[inline]
    fn find(&self, s: &StructSchema) -> Option<usize> {
        let addr = addr(s);
        let mask = self.slots.len() - 1;
        let mut at = hash(addr, self.shift);
        loop {
            match self.slots[at] {
                (_, 0) => return None,
                (a, i) if a == addr => return Some(i as usize - 1),
                _ => at = (at + 1) & mask,
            }
        }
    }
}

#[inline]
fn addr(s: &StructSchema) -> usize {
    s as *const StructSchema as usize
}

#[inline]
fn hash(addr: usize, shift: u32) -> usize {
    ((addr as u64 >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> shift) as usize
}

fn index() -> &'static Index {
    static INDEX: OnceLock<Index> = OnceLock::new();
    INDEX.get_or_init(Index::build)
}

/// One value of type `T` per struct, computed on first use.
pub(crate) struct PerStruct<T: 'static> {
    /// The index and one cell per indexed struct, behind one load.
    cells: OnceLock<(&'static Index, Box<[OnceLock<T>]>)>,
    /// Structs outside the tables, by address.
    others: Mutex<Vec<(usize, &'static T)>>,
}

impl<T: Send + Sync + 'static> PerStruct<T> {
    /// An empty cache, for a `static`.
    pub(crate) const fn new() -> Self {
        PerStruct { cells: OnceLock::new(), others: Mutex::new(Vec::new()) }
    }

    /// The value for `s`, computed by `make` on first use. `make` may fill
    /// the cache for other structs (a default that is a nested struct).
    #[inline]
    pub(crate) fn get(&'static self, s: &StructSchema, make: impl FnOnce() -> T) -> &'static T {
        let (ix, cells) = self.cells.get_or_init(|| {
            let ix = index();
            (ix, (0..ix.len).map(|_| OnceLock::new()).collect())
        });
        match ix.find(s) {
            Some(i) => cells[i].get_or_init(make),
            None => self.other(s, make),
        }
    }

    #[cold]
    fn other(&'static self, s: &StructSchema, make: impl FnOnce() -> T) -> &'static T {
        let find = |v: &[(usize, &'static T)]| v.iter().find(|(a, _)| *a == addr(s)).map(|(_, t)| *t);
        if let Some(t) = find(&self.others.lock().unwrap_or_else(|e| e.into_inner())) {
            return t;
        }
        // Computed without the lock: `make` may come back here for another
        // struct.
        let made = make();
        let mut others = self.others.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = find(&others) {
            return t;
        }
        let t: &'static T = Box::leak(Box::new(made));
        others.push((addr(s), t));
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Layout, VLLM_RELEASES};

    #[test]
    fn every_struct_of_every_table_has_its_own_index() {
        let ix = index();
        let mut seen = vec![false; ix.len];
        for r in ALL_RELEASES {
            for s in r.structs() {
                let i = ix.find(s).expect("a table struct is indexed");
                seen[i] = true;
            }
        }
        assert!(seen.iter().all(|s| *s));
    }

    #[test]
    fn a_cache_computes_once_per_struct_and_keeps_structs_apart() {
        static C: PerStruct<&'static str> = PerStruct::new();
        let a = VLLM_RELEASES[0].sampling_params;
        let b = VLLM_RELEASES[0].engine_core_output;
        assert_eq!(*C.get(a, || a.name), "SamplingParams");
        assert_eq!(*C.get(a, || "computed twice"), "SamplingParams");
        assert_eq!(*C.get(b, || b.name), "EngineCoreOutput");
    }

    #[test]
    fn a_struct_outside_the_tables_is_cached_on_the_side() {
        static HAND: StructSchema =
            StructSchema { name: "Hand", layout: Layout::FullMap, fields: &[], validate: None, tag: None };
        static C: PerStruct<u32> = PerStruct::new();
        assert_eq!(index().find(&HAND), None);
        assert_eq!(*C.get(&HAND, || 7), 7);
        assert_eq!(*C.get(&HAND, || 8), 7);
    }
}
