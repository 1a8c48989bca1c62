//! `GET /contract-changes` query parameters, and whose records a viewer's
//! stream reads (pure).

use serde::Deserialize;

use crate::buying::contracts::http::{active_param, query_error};
use crate::buying::contracts::model::{ContractFilter, Viewer};
use crate::buying::error::BuyError;
use crate::buying::store::Party;

/// What a stream was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StreamQuery {
    /// Resume after this sequence (None: start with a snapshot).
    pub since: Option<u64>,
    /// Filters the snapshot only: changes carry every contract of the
    /// caller's, ended ones included.
    pub active: Option<bool>,
}

impl StreamQuery {
    /// The snapshot's filter.
    pub fn filter(&self) -> ContractFilter {
        ContractFilter {
            active: self.active,
            state: None,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    #[serde(default)]
    since: Option<String>,
    #[serde(default)]
    active: Option<String>,
}

/// Parse the query string: 400 naming the bad or unknown parameter.
pub fn parse(query: &str) -> Result<StreamQuery, BuyError> {
    let raw: Raw = serde_urlencoded::from_str(query).map_err(query_error)?;
    let since = match raw.since.as_deref() {
        None => None,
        Some(s) => Some(s.parse::<u64>().map_err(|_| {
            BuyError::bad_request(
                "since",
                "must be a sequence number (0 to 18446744073709551615) from an earlier line's `seq`",
            )
        })?),
    };
    let active = active_param(raw.active.as_deref())?;
    Ok(StreamQuery { since, active })
}

/// Whose records `who`'s stream reads: an admin all; a consumer those it
/// bought, a provider those its cluster sold (both for a caller that is
/// both).
pub fn party_of(who: &Viewer) -> Party {
    if who.admin {
        return Party::All;
    }
    Party::Of {
        consumer: who.consumer.then(|| who.subject.clone()),
        provider: who.provider.then(|| who.subject.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buying::error::BuyError;
    use crate::http::ApiError;

    fn field(e: BuyError) -> String {
        match e {
            BuyError::Api(ApiError::BadRequest(f)) => f.field,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn since_and_active_are_checked_and_named() {
        assert_eq!(parse("").unwrap(), StreamQuery::default());
        assert_eq!(
            parse("since=42&active=true").unwrap(),
            StreamQuery {
                since: Some(42),
                active: Some(true)
            }
        );
        assert_eq!(field(parse("since=-1").unwrap_err()), "since");
        assert_eq!(field(parse("since=abc").unwrap_err()), "since");
        assert_eq!(
            field(parse("since=18446744073709551616").unwrap_err()),
            "since"
        );
        assert_eq!(field(parse("active=yes").unwrap_err()), "active");
        assert_eq!(field(parse("state=ready").unwrap_err()), "state");
    }

    #[test]
    fn a_viewer_reads_its_own_party() {
        let who = |consumer, provider, admin| Viewer {
            subject: "s".into(),
            consumer,
            provider,
            admin,
        };
        assert_eq!(party_of(&who(true, true, true)), Party::All);
        assert_eq!(
            party_of(&who(true, false, false)),
            Party::Of {
                consumer: Some("s".into()),
                provider: None
            }
        );
        assert_eq!(
            party_of(&who(false, true, false)),
            Party::Of {
                consumer: None,
                provider: Some("s".into())
            }
        );
    }
}
