//! Typed columns: one `Vec` per field, indexed by an entity id.
//!
//! A [`Column`] is the struct-of-arrays building block of the module (and of
//! pass side tables, as cranelift's `SecondaryMap`). Growth happens only in
//! [`Column::push`], which the builder and the parser call; passes add entities
//! through [`Column::try_push`], which never reallocates and reports a full
//! workspace instead, so that a pass touches no heap after reservation.

use alloc::vec::Vec;
use core::marker::PhantomData;
use core::ops::{Index, IndexMut};

/// Converts between an entity id and a column index.
pub trait EntityRef: Copy {
    /// The entity at `index`.
    fn new(index: usize) -> Self;
    /// The column index of this entity.
    fn index(self) -> usize;
}

/// A `Vec<V>` indexed by the entity type `K`.
#[derive(Clone, PartialEq, Eq)]
pub struct Column<K, V> {
    data: Vec<V>,
    _key: PhantomData<fn(K) -> K>,
}

impl<K, V: core::fmt::Debug> core::fmt::Debug for Column<K, V> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.data.iter()).finish()
    }
}

impl<K: EntityRef, V> Default for Column<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: EntityRef, V> Column<K, V> {
    /// An empty column.
    pub const fn new() -> Self {
        Column {
            data: Vec::new(),
            _key: PhantomData,
        }
    }

    /// An empty column with room for `n` entities.
    pub fn with_capacity(n: usize) -> Self {
        Column {
            data: Vec::with_capacity(n),
            _key: PhantomData,
        }
    }

    /// Reserves room for `extra` more entities (may allocate).
    pub fn reserve(&mut self, extra: usize) {
        self.data.reserve(extra);
    }

    /// Reserves room for exactly `extra` more entities (may allocate): no
    /// doubling, for headroom reserved once before a pass.
    pub fn reserve_exact(&mut self, extra: usize) {
        self.data.reserve_exact(extra);
    }

    /// Drops the reserved room beyond the entities held (may allocate).
    pub fn shrink_to_fit(&mut self) {
        self.data.shrink_to_fit();
    }

    /// Appends a value, growing the storage if needed; returns its key.
    pub fn push(&mut self, v: V) -> K {
        let k = K::new(self.data.len());
        self.data.push(v);
        k
    }

    /// Appends a value only if the reserved capacity has room; never allocates.
    pub fn try_push(&mut self, v: V) -> Result<K, V> {
        if self.data.len() == self.data.capacity() {
            return Err(v);
        }
        Ok(self.push(v))
    }

    /// Number of entities.
    #[inline]
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// True when there are no entities.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Reserved room.
    pub fn capacity(&self) -> usize {
        self.data.capacity()
    }

    /// The value of `k`, or `None` when `k` is out of range or the sentinel.
    #[inline]
    pub fn get(&self, k: K) -> Option<&V> {
        self.data.get(k.index())
    }

    /// Mutable access to the value of `k`, if in range.
    #[inline]
    pub fn get_mut(&mut self, k: K) -> Option<&mut V> {
        self.data.get_mut(k.index())
    }

    /// All keys in index order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = K> + ExactSizeIterator {
        (0..self.data.len()).map(K::new)
    }

    /// All values in index order.
    pub fn values(&self) -> core::slice::Iter<'_, V> {
        self.data.iter()
    }

    /// Keys with their values.
    pub fn iter(&self) -> impl Iterator<Item = (K, &V)> {
        self.data.iter().enumerate().map(|(i, v)| (K::new(i), v))
    }

    /// Makes `self` equal to `src`, reserving at least `src`'s room first
    /// (no allocation when `self` has it already).
    pub fn copy_from_column(&mut self, src: &Self)
    where
        V: Clone,
    {
        crate::storage::copy_into(&mut self.data, &src.data);
    }

    /// Drops every entity, keeping the storage.
    pub fn clear(&mut self) {
        self.data.clear();
    }

    /// Bytes of storage per entity (for memory reports).
    pub const fn bytes_per_entity() -> usize {
        core::mem::size_of::<V>()
    }

    /// Bytes of storage reserved.
    pub fn reserved_bytes(&self) -> usize {
        self.data.capacity() * core::mem::size_of::<V>()
    }
}

impl<K: EntityRef, V: Clone> Column<K, V> {
    /// Resizes to `n` entities, filling with `fill` (may allocate).
    pub fn resize(&mut self, n: usize, fill: V) {
        self.data.resize(n, fill);
    }

    /// Sets every entry to `v`, keeping the length.
    pub fn fill(&mut self, v: V) {
        for x in self.data.iter_mut() {
            *x = v.clone();
        }
    }
}

impl<K: EntityRef, V> Index<K> for Column<K, V> {
    type Output = V;
    #[inline]
    fn index(&self, k: K) -> &V {
        &self.data[k.index()]
    }
}

impl<K: EntityRef, V> IndexMut<K> for Column<K, V> {
    #[inline]
    fn index_mut(&mut self, k: K) -> &mut V {
        &mut self.data[k.index()]
    }
}

impl<K: EntityRef, V> crate::storage::HeapBytes for Column<K, V> {
    fn heap_bytes(&self) -> u64 {
        self.reserved_bytes() as u64
    }
}
