//! The policy file (TOML): which providers a consumer's namespaces may go
//! to and how many, read once at start. A file that cannot be used is
//! refused with the line at fault.
//!
//! ```toml
//! spread = 1                            # providers per namespace
//! required_labels = { region = "eu-west" }  # offer labels every provider must carry
//! deny = ["provider-x"]                 # never these providers
//! # allow = ["p1", "p2"]                # only these (absent: any)
//!
//! [hysteresis]
//! min_saving_percent = 10               # move to cheaper providers only when >10% cheaper…
//! hold = "5m"                           # …for longer than this
//!
//! [[consumer]]                          # rules of one consumer, added to the global ones
//! id = "consumer-1"
//! allow = ["p1", "p2"]
//! required_labels = { compliance = "gdpr" }
//! spread = 2
//! ```
//!
//! Rules compose: a provider must pass the global **and** the consumer's
//! allow lists, is excluded by either deny list, and must carry the global
//! **and** the consumer's required labels; the consumer's `spread`
//! replaces the global one.
//!
//! Lists that cannot mean what they say are refused: an empty `allow`
//! (it would place nothing; absent means any), a provider both allowed and
//! denied where the two lists apply together, and an id the catalog would
//! not accept as a cluster ID (it could never match an offer).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use catalog_client::wire::names;
use serde::Deserialize;
use toml::Spanned;

/// Most providers one namespace may be spread over.
pub const MAX_SPREAD: usize = 64;

/// How a namespace stays on its providers (the placement decision applies it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hysteresis {
    /// A cheaper set of providers must cost less than the current one by
    /// more than this percentage…
    pub min_saving_percent: u32,
    /// …continuously for longer than this, before the namespace moves.
    pub hold: Duration,
}

impl Default for Hysteresis {
    fn default() -> Self {
        Hysteresis {
            min_saving_percent: 10,
            hold: Duration::from_secs(300),
        }
    }
}

/// The rules for one consumer: the global ones composed with its own.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rules {
    pub spread: usize,
    /// Each set (global, consumer) that is present must contain the provider.
    pub allow: Vec<BTreeSet<String>>,
    pub deny: BTreeSet<String>,
    pub required_labels: BTreeMap<String, String>,
}

/// The whole policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    global: Rules,
    consumers: BTreeMap<String, ConsumerRules>,
    pub hysteresis: Hysteresis,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct ConsumerRules {
    spread: Option<usize>,
    allow: Option<BTreeSet<String>>,
    deny: BTreeSet<String>,
    required_labels: BTreeMap<String, String>,
}

impl Default for Policy {
    /// Any provider, one per namespace, default hysteresis.
    fn default() -> Self {
        Policy {
            global: Rules {
                spread: 1,
                ..Rules::default()
            },
            consumers: BTreeMap::new(),
            hysteresis: Hysteresis::default(),
        }
    }
}

impl Policy {
    /// The composed rules for `consumer`.
    pub fn rules_for(&self, consumer: &str) -> Rules {
        let mut rules = self.global.clone();
        if let Some(c) = self.consumers.get(consumer) {
            if let Some(spread) = c.spread {
                rules.spread = spread;
            }
            rules.allow.extend(c.allow.iter().cloned());
            rules.deny.extend(c.deny.iter().cloned());
            rules.required_labels.extend(
                c.required_labels
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone())),
            );
        }
        rules
    }

    /// Read and check the file at `path`.
    /// Read `--policy`'s file as every file a flag names is (regular,
    /// at most [`MAX_POLICY_BYTES`], within a deadline), then [`parse`](Self::parse) it.
    pub fn load(path: &Path) -> Result<Policy, PolicyError> {
        let text = edge::config_file::read("--policy", path, MAX_POLICY_BYTES)?;
        Policy::parse(&text).map_err(|e| e.in_file(path))
    }

    /// Parse and check policy text.
    pub fn parse(text: &str) -> Result<Policy, PolicyError> {
        let file: File = toml::from_str(text).map_err(|e| PolicyError::Invalid {
            path: None,
            line: e.span().map(|s| line_of(text, s.start)).unwrap_or(1),
            message: e.message().trim_end().to_string(),
        })?;
        let at = |offset: usize, message: String| PolicyError::Invalid {
            path: None,
            line: line_of(text, offset),
            message,
        };
        let spread = |s: &Spanned<i64>| -> Result<usize, PolicyError> {
            usize::try_from(*s.get_ref())
                .ok()
                .filter(|n| (1..=MAX_SPREAD).contains(n))
                .ok_or_else(|| at(s.span().start, format!("spread must be 1 to {MAX_SPREAD}")))
        };
        let labels = |l: &Option<Spanned<BTreeMap<String, String>>>| match l {
            None => Ok::<_, PolicyError>(BTreeMap::new()),
            Some(l) => {
                for (k, v) in l.get_ref() {
                    check_label(k, v).map_err(|m| at(l.span().start, m))?;
                }
                Ok(l.get_ref().clone())
            }
        };
        let set = |l: &Option<Spanned<Vec<String>>>,
                   what: &str|
         -> Result<Option<BTreeSet<String>>, PolicyError> {
            let Some(l) = l else { return Ok(None) };
            check_providers(what, l.get_ref())
                .map(Some)
                .map_err(|m| at(l.span().start, m))
        };
        // Deny wins over allow, so a provider on both is never chosen and
        // the allow entry only misleads the reader.
        let overlap = |allow: &Option<Spanned<Vec<String>>>,
                       allowed: &Option<BTreeSet<String>>,
                       deny: &BTreeSet<String>,
                       lists: &str| {
            match (allow, allowed) {
                (Some(l), Some(allowed)) => match allowed.intersection(deny).next() {
                    Some(p) => Err(at(
                        l.span().start,
                        format!("allow: provider {p} is on both {lists}; deny wins, so allowing it means nothing"),
                    )),
                    None => Ok(()),
                },
                _ => Ok(()),
            }
        };

        let mut global = Rules {
            spread: match &file.spread {
                Some(s) => spread(s)?,
                None => 1,
            },
            allow: Vec::new(),
            deny: set(&file.deny, "deny")?.unwrap_or_default(),
            required_labels: labels(&file.required_labels)?,
        };
        let allow = set(&file.allow, "allow")?;
        overlap(&file.allow, &allow, &global.deny, "allow and deny")?;
        global.allow.extend(allow);

        let mut hysteresis = Hysteresis::default();
        if let Some(h) = &file.hysteresis {
            if let Some(p) = &h.min_saving_percent {
                hysteresis.min_saving_percent = u32::try_from(*p.get_ref())
                    .ok()
                    .filter(|p| *p <= 100)
                    .ok_or_else(|| {
                        at(p.span().start, "min_saving_percent must be 0 to 100".into())
                    })?;
            }
            if let Some(hold) = &h.hold {
                hysteresis.hold = edge::duration::parse(hold.get_ref())
                    .map_err(|m| at(hold.span().start, format!("hold: {m}")))?;
            }
        }

        let mut consumers = BTreeMap::new();
        for c in &file.consumer {
            let id = c.id.get_ref().trim();
            if id.is_empty() {
                return Err(at(
                    c.id.span().start,
                    "consumer id must not be empty".into(),
                ));
            }
            let rules = ConsumerRules {
                spread: c.spread.as_ref().map(spread).transpose()?,
                allow: set(&c.allow, "allow")?,
                deny: set(&c.deny, "deny")?.unwrap_or_default(),
                required_labels: labels(&c.required_labels)?,
            };
            overlap(
                &c.allow,
                &rules.allow,
                &rules.deny,
                "this consumer's allow and deny",
            )?;
            overlap(
                &c.allow,
                &rules.allow,
                &global.deny,
                "this consumer's allow and the global deny",
            )?;
            for (k, v) in &rules.required_labels {
                if global.required_labels.get(k).is_some_and(|g| g != v) {
                    let span = c.required_labels.as_ref().map_or(0, |l| l.span().start);
                    return Err(at(
                        span,
                        format!(
                            "required label {k}={v} contradicts the global {k}={}",
                            global.required_labels[k]
                        ),
                    ));
                }
            }
            if consumers.insert(id.to_string(), rules).is_some() {
                return Err(at(
                    c.id.span().start,
                    format!("consumer {id} is given twice"),
                ));
            }
        }
        Ok(Policy {
            global,
            consumers,
            hysteresis,
        })
    }
}

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    spread: Option<Spanned<i64>>,
    allow: Option<Spanned<Vec<String>>>,
    deny: Option<Spanned<Vec<String>>>,
    required_labels: Option<Spanned<BTreeMap<String, String>>>,
    hysteresis: Option<HysteresisFile>,
    #[serde(default)]
    consumer: Vec<ConsumerFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HysteresisFile {
    min_saving_percent: Option<Spanned<i64>>,
    hold: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConsumerFile {
    id: Spanned<String>,
    spread: Option<Spanned<i64>>,
    allow: Option<Spanned<Vec<String>>>,
    deny: Option<Spanned<Vec<String>>>,
    required_labels: Option<Spanned<BTreeMap<String, String>>>,
}

/// Largest policy file read: a policy lists providers and labels, never
/// megabytes of them.
pub const MAX_POLICY_BYTES: u64 = 1024 * 1024;

/// A policy file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file cannot be read, or is not a regular file of at most
    /// [`MAX_POLICY_BYTES`]; the message names `--policy` and the file.
    #[error(transparent)]
    Read(#[from] edge::config_file::ConfigFileError),
    #[error("{}line {line}: {message}", path.as_ref().map(|p| format!("{}: ", p.display())).unwrap_or_default())]
    Invalid {
        path: Option<PathBuf>,
        line: usize,
        message: String,
    },
}

impl PolicyError {
    fn in_file(self, file: &Path) -> Self {
        match self {
            PolicyError::Invalid { line, message, .. } => PolicyError::Invalid {
                path: Some(file.to_path_buf()),
                line,
                message,
            },
            other => other,
        }
    }

    /// The 1-based line at fault, if the file was read.
    pub fn line(&self) -> Option<usize> {
        match self {
            PolicyError::Invalid { line, .. } => Some(*line),
            PolicyError::Read(_) => None,
        }
    }
}

/// An allow or deny list as a set: every entry a provider cluster ID the
/// catalog would accept (anything else can never match an offer, so it is
/// a mistake, not a rule), and an allow list that names someone — an empty
/// one would place no namespace at all (leave `allow` out to allow any).
fn check_providers(what: &str, providers: &[String]) -> Result<BTreeSet<String>, String> {
    if what == "allow" && providers.is_empty() {
        return Err(
            "allow is empty: it would place no namespace (leave allow out to allow any provider)"
                .into(),
        );
    }
    match providers.iter().find(|p| !names::is_id(p)) {
        Some(p) => Err(format!(
            "{what}: {p:?} is not a cluster ID ({})",
            names::ID_RULE
        )),
        None => Ok(providers.iter().cloned().collect()),
    }
}

/// A required label must be one a provider could publish: the catalog's
/// rules (Kubernetes label syntax), checked loosely here — a key and value
/// without spaces or `=`.
fn check_label(key: &str, value: &str) -> Result<(), String> {
    let bad = |s: &str| {
        s.chars()
            .any(|c| c.is_whitespace() || c == '=' || c.is_control())
    };
    if key.is_empty() || bad(key) {
        return Err(format!("required_labels: {key:?} is not a label key"));
    }
    if bad(value) {
        return Err(format!(
            "required_labels: {key}={value:?} is not a label value"
        ));
    }
    Ok(())
}

/// 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset)
        .map_or(0, |before| before.matches('\n').count())
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"
spread = 1
required_labels = { region = "eu-west" }
deny = ["bad"]

[hysteresis]
min_saving_percent = 20
hold = "1m"

[[consumer]]
id = "c1"
allow = ["p1", "p2"]
required_labels = { compliance = "gdpr" }
spread = 2
"#;

    #[test]
    fn rules_compose() {
        let p = Policy::parse(EXAMPLE).unwrap();
        assert_eq!(p.hysteresis.min_saving_percent, 20);
        assert_eq!(p.hysteresis.hold, Duration::from_secs(60));
        let c1 = p.rules_for("c1");
        assert_eq!(c1.spread, 2);
        assert_eq!(c1.allow.len(), 1);
        assert!(c1.deny.contains("bad"));
        assert_eq!(c1.required_labels.len(), 2);
        let other = p.rules_for("c2");
        assert_eq!(other.spread, 1);
        assert!(other.allow.is_empty());
        assert_eq!(other.required_labels.len(), 1);
        assert_eq!(Policy::parse("").unwrap(), Policy::default());
    }

    /// Lists no placement could use (issue 29): each row names its line,
    /// the field and the problem; every row is checked before failing, so
    /// the failure lists all that were accepted or misreported.
    #[test]
    fn lists_that_cannot_mean_anything_are_refused() {
        let wrong: Vec<String> = [
            ("\ndeny = [\"\"]\n", 2, "deny: \"\" is not a cluster ID"),
            ("\nallow = []\n", 2, "allow is empty"),
            (
                "[[consumer]]\nid = \"c\"\nallow = []\n",
                3,
                "allow is empty",
            ),
            (
                "allow = [\"p1\", \"p2\"]\ndeny = [\"p2\"]\n",
                1,
                "provider p2 is on both allow and deny",
            ),
            (
                "[[consumer]]\nid = \"c\"\nallow = [\"p1\"]\ndeny = [\"p1\"]\n",
                3,
                "p1 is on both this consumer's allow and deny",
            ),
            (
                "deny = [\"p1\"]\n[[consumer]]\nid = \"c\"\nallow = [\"p1\"]\n",
                4,
                "p1 is on both this consumer's allow and the global deny",
            ),
            (
                "allow = [\"provider one\"]\n",
                1,
                "allow: \"provider one\" is not a cluster ID",
            ),
            (
                "[[consumer]]\nid = \"c\"\ndeny = [\" p1\"]\n",
                3,
                "deny: \" p1\" is not a cluster ID",
            ),
            ("deny = [\"p/1\"]\n", 1, "not a cluster ID"),
        ]
        .into_iter()
        .filter_map(|(text, line, words)| match Policy::parse(text) {
            Ok(_) => Some(format!("{text:?} accepted")),
            Err(e) if e.line() != Some(line) || !e.to_string().contains(words) => {
                Some(format!("{text:?}: {e}"))
            }
            Err(_) => None,
        })
        .collect();
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    #[test]
    fn a_global_allow_a_consumer_denies_is_a_refinement() {
        let p =
            Policy::parse("allow = [\"p1\", \"p2\"]\n[[consumer]]\nid = \"c\"\ndeny = [\"p1\"]\n")
                .unwrap();
        let c = p.rules_for("c");
        assert!(c.allow[0].contains("p1") && c.deny.contains("p1"));
    }

    #[test]
    fn bad_files_name_their_line() {
        for (text, line, words) in [
            ("spread = 0\n", 1, "spread must be"),
            ("\n\nspread = \"two\"\n", 3, "invalid type"),
            ("\ncolour = 1\n", 2, "unknown field"),
            ("[hysteresis]\nhold = \"soon\"\n", 2, "hold:"),
            ("[hysteresis]\n\nmin_saving_percent = 101\n", 3, "0 to 100"),
            ("[[consumer]]\nid = \"a\"\n[[consumer]]\nid = \"a\"\n", 4, "given twice"),
            ("required_labels = { a = \"x\" }\n[[consumer]]\nid = \"c\"\nrequired_labels = { a = \"y\" }\n", 4, "contradicts"),
            ("required_labels = { \"a b\" = \"x\" }\n", 1, "not a label key"),
            ("spread = [\n", 1, ""),
        ] {
            let e = Policy::parse(text).unwrap_err();
            assert_eq!(e.line(), Some(line), "{text:?}: {e}");
            assert!(e.to_string().contains(words), "{text:?}: {e}");
        }
    }
}
