//! Typed `u32` indices.
//!
//! Every entity of the IR is addressed by a newtype made by
//! `entity_id!`:
//! `u32` storage, `u32::MAX` as the invalid sentinel (hot columns hold the
//! sentinel instead of an `Option`), and a `Display` that is the entity's
//! spelling in the text format (`block3`, `inst12`).

/// Defines a `u32` index newtype with an invalid sentinel and a text spelling.
macro_rules! entity_id {
    ($(#[$meta:meta])* $name:ident, $prefix:expr) => {
        $(#[$meta])*
        #[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        #[repr(transparent)]
        pub struct $name(u32);

        impl $name {
            /// The sentinel stored where no entity is meant.
            pub const INVALID: Self = Self(u32::MAX);

            /// The entity at `index`. Indices are below `u32::MAX` by the
            /// capacity limits of the module.
            #[inline]
            pub const fn new(index: usize) -> Self {
                Self(index as u32)
            }

            /// The entity whose raw number is `raw`.
            #[inline]
            pub const fn from_u32(raw: u32) -> Self {
                Self(raw)
            }

            /// The index into this entity's columns.
            #[inline]
            pub const fn index(self) -> usize {
                self.0 as usize
            }

            /// The raw number.
            #[inline]
            pub const fn as_u32(self) -> u32 {
                self.0
            }

            /// False for the sentinel.
            #[inline]
            pub const fn is_valid(self) -> bool {
                self.0 != u32::MAX
            }
        }

        impl ::core::fmt::Display for $name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                if self.is_valid() {
                    write!(f, "{}{}", $prefix, self.0)
                } else {
                    write!(f, "{}?", $prefix)
                }
            }
        }

        impl ::core::fmt::Debug for $name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                ::core::fmt::Display::fmt(self, f)
            }
        }
    };
}
pub(crate) use entity_id;

#[cfg(test)]
#[allow(dead_code)]
mod tests {
    entity_id!(
        /// A test entity.
        Thing,
        "thing"
    );

    #[test]
    fn index_round_trip_and_spelling() {
        let t = Thing::new(12);
        assert_eq!(t.index(), 12);
        assert_eq!(Thing::from_u32(t.as_u32()), t);
        assert!(t.is_valid());
        assert!(!Thing::INVALID.is_valid());
        assert_eq!(alloc::format!("{t}"), "thing12");
        assert_eq!(alloc::format!("{}", Thing::INVALID), "thing?");
    }
}
