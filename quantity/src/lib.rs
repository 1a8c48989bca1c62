//! Kubernetes resource quantities (`"1500m"`, `"4Gi"`, `"1e3"`) and resource
//! lists (resource name → quantity), with the same parsing, canonical printing
//! and arithmetic as Kubernetes' `resource.Quantity`.
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
//! let free = ResourceList::from_strings([("cpu", "4"), ("memory", "8Gi")]).unwrap();
//! let asked = ResourceList::from_strings([("cpu", "1500m")]).unwrap();
//! assert!(asked.fits_within(&free));
//! assert_eq!(free.saturating_sub(&asked).to_strings()["cpu"], "2500m");
//! ```
//!
//! Values are exact: a quantity is a whole number of nano units held in a big
//! integer, never a float. Where this crate knowingly differs from
//! Kubernetes (k8s.io/apimachinery `pkg/api/resource`):
//!
//! - **Printing is always canonical.** Kubernetes' `String()` hands back the
//!   original input for some freshly parsed strings (`"+1"`, `"007"`, `"1E3"`,
//!   `"1.500k"` print as typed); this crate always prints the
//!   `CanonicalizeBytes` form (`"1"`, `"7"`, `"1e3"`, `"1500"`).
//! - **A number needs a digit.** Kubernetes' scanner reads `"Mi"`, `"m"`,
//!   `"."`, `"-"` and `"e3"` as zero; they are refused here, as the grammar
//!   and regular expression Kubernetes documents require a digit.
//! - **Limits.** Magnitudes of `10^1000` and above are refused
//!   ([`ParseError::OutOfRange`]); Kubernetes accepts them but its own
//!   arithmetic on them can exhaust memory. Exponents outside int32 are
//!   refused ([`ParseError::Suffix`]) where Kubernetes silently wraps them.
//! - **Binary values past `Ei`** (reachable only by arithmetic, since parsing
//!   caps binary values at 2^63-1 like Kubernetes) print as `"1024Ei"`;
//!   Kubernetes has no suffix there and prints the mantissa alone.
//! - **int64 readers saturate**: [`Quantity::value`] and
//!   [`Quantity::milli_value`] return `i64::MAX` / `i64::MIN` where
//!   Kubernetes overflows to an undefined value.
//! - **JSON** accepts a string (whitespace trimmed, like `UnmarshalJSON`) or
//!   an integer; a JSON float such as `0.5` is refused rather than read
//!   through floating point.

mod canonical;
mod list;
mod parse;
mod quantity;

pub use list::ResourceList;
pub use parse::MAX_INTEGER_DIGITS;
pub use quantity::{Format, ParseError, Quantity};
