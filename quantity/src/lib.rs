//! Kubernetes resource quantities (`"1500m"`, `"4Gi"`, `"1e3"`) and resource
//! lists (resource name → quantity), with the same parsing, printing and
//! arithmetic as Kubernetes' `resource.Quantity`.
//!
//! Every part of the broker that compares, sums or scales resources goes
//! through this crate, so a value means the same thing in the catalog's
//! filters, the ResourceReader stages and the aggregator.
//!
//! ```
//! use quantity::{Quantity, ResourceList};
//!
//! let memory: Quantity = "1024Mi".parse().unwrap();
//! assert_eq!(memory.to_string(), "1Gi");
//! // Add keeps the format of the first non-zero operand, as in Kubernetes.
//! let sum = "2G".parse::<Quantity>().unwrap().add(&memory);
//! assert_eq!(sum.to_string(), "3073741824");
//!
//! // A string Kubernetes keeps prints as typed; equality is by value.
//! let cpu: Quantity = "9264.126m".parse().unwrap();
//! assert_eq!(cpu.to_string(), "9264.126m");
//! assert_eq!(cpu.canonical(), "9264126u");
//! assert_eq!("+2Gi".parse::<Quantity>().unwrap(), "2Gi".parse::<Quantity>().unwrap());
//!
//! let free = ResourceList::from_strings([("cpu", "4"), ("memory", "8Gi")]).unwrap();
//! let asked = ResourceList::from_strings([("cpu", "1500m")]).unwrap();
//! assert!(asked.fits_within(&free));
//! assert_eq!(free.saturating_sub(&asked).to_strings()["cpu"], "2500m");
//! ```
//!
//! # Printing
//!
//! `Display`, `to_string()` and `Serialize` print what Kubernetes' `String()`
//! and `MarshalJSON` print. A parsed quantity keeps its input string when
//! Kubernetes' `ParseQuantity` does (`"9264.126m"`, `"+2Gi"`, `"1."`, `"1E3"`,
//! `"1.500k"`; the exact rule is in [`Quantity::kept_spelling`]); any other
//! quantity, and every result of arithmetic, prints the canonical form of
//! Kubernetes' `CanonicalizeBytes` (`"1.5"` → `"1500m"`, `"1024Mi"` → `"1Gi"`,
//! `"1e1000"` → `"10e999"`), which [`Quantity::canonical`] always returns.
//! Equality, ordering and hashing are by value only.
//!
//! # Differences from Kubernetes
//!
//! Values are exact: a quantity is a whole number of nano units held in a big
//! integer, never a float. Where this crate knowingly differs from
//! Kubernetes (k8s.io/apimachinery `pkg/api/resource`):
//!
//! - **A number needs a digit.** Kubernetes' scanner reads `"Mi"`, `"m"`,
//!   `"."`, `"-"` and `"e3"` as zero (and refuses `".e-10"`); they are all
//!   refused here, as the grammar and regular expression Kubernetes documents
//!   require a digit.
//! - **Limits.** Magnitudes of `10^100000` and above are refused
//!   ([`ParseError::OutOfRange`], [`MAX_INTEGER_DIGITS`]), so that no input
//!   can make a value, or a sum, take more than about 41 KiB or a few
//!   milliseconds; Kubernetes has no bound (and can exhaust its memory on
//!   such values). Exponents outside int32 are refused
//!   ([`ParseError::Suffix`]) where Kubernetes silently wraps them
//!   (`"1e4294967296"` is `1` there), and so are exponents so close to
//!   int32's minimum that Kubernetes' own scale arithmetic wraps
//!   (exponent − fraction digits ≤ −2^31: `"1e-2147483648"`,
//!   `"1.00E-2147483647"`). Tiny values otherwise have no bound: they round
//!   up to `1n` as in Kubernetes (`"1e-999999999"` is `1n`).
//! - **Binary values past `Ei`** (reachable only by arithmetic, since parsing
//!   caps binary values at 2^63-1 like Kubernetes) print as `"1024Ei"`;
//!   Kubernetes has no suffix there and prints the mantissa alone.
//! - **int64 readers saturate**: [`Quantity::value`] and
//!   [`Quantity::milli_value`] return `i64::MAX` / `i64::MIN` where
//!   Kubernetes overflows to an undefined value.
//! - **JSON** accepts a string (whitespace trimmed, like `UnmarshalJSON`) or
//!   an integer; a JSON float such as `0.5` is refused rather than read
//!   through floating point.
//! - **Changing the format** ([`Quantity::with_format`]) drops the kept
//!   spelling; in Go, assigning `q.Format` leaves a cached string in place.

mod canonical;
mod list;
mod parse;
mod quantity;

pub use list::ResourceList;
pub use parse::{ParseError, MAX_INTEGER_DIGITS};
pub use quantity::{Format, Quantity};
