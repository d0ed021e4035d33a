//! Enums named on command lines and in documents: each variant's name, the list of them,
//! and parsing back, in one place per enum. The binaries' command-line crates turn the
//! lists into their parsers; the library itself knows nothing of any CLI framework.

/// Implements `NAMES`, `ALL`, `name()` and `FromStr` for a fieldless enum from its
/// `Variant => "name"` table.
#[macro_export]
macro_rules! named_enum {
    ($ty:ident { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl $ty {
            /// Every variant, in the order of the table.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];
            /// Every variant's name, in the same order.
            pub const NAMES: &'static [&'static str] = &[$($name),+];
            /// The name users type and documents record.
            pub fn name(self) -> &'static str {
                match self {
                    $($ty::$variant => $name),+
                }
            }
        }
        impl ::std::str::FromStr for $ty {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                Self::ALL
                    .iter()
                    .copied()
                    .find(|v| v.name() == s)
                    .ok_or_else(|| format!("'{s}' is not one of {}", Self::NAMES.join(", ")))
            }
        }
    };
}

#[cfg(test)]
mod tests {
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Colour {
        Red,
        Blue,
    }
    named_enum!(Colour { Red => "red", Blue => "blue" });

    #[test]
    fn names_round_trip_and_unknown_ones_list_the_choices() {
        for c in Colour::ALL {
            assert_eq!(c.name().parse::<Colour>(), Ok(*c));
        }
        assert_eq!(Colour::NAMES, ["red", "blue"]);
        assert_eq!(
            "green".parse::<Colour>(),
            Err("'green' is not one of red, blue".into())
        );
    }
}
