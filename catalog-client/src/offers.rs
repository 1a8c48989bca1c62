//! The provider's offer endpoints: read one offer (`GET /offer/{id}`),
//! create or replace it (`POST /offer/{id}`) and withdraw it (`DELETE
//! /offer/{id}`). The offer travels as JSON as
//! the catalog wrote it, so a client that edits one field keeps every other
//! field (even ones newer than this client) as it was.

use reqwest::{Method, StatusCode};
use serde::Deserialize;
use serde_json::Value;
use tracing::Instrument;

use crate::error::Error;
use crate::http::MAX_ANSWER_BYTES;
use crate::routes;
use crate::session::Session;

/// The result of a successful write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// 201 (the offer did not exist) rather than 200.
    pub created: bool,
    /// The offer's version after the write.
    pub version: u64,
}

impl Session {
    /// `GET /offer/{id}`: the offer's JSON, or `None` if there is none.
    pub async fn get_offer(&mut self, id: &str) -> Result<Option<Value>, Error> {
        let what = format!("GET /offer/{id}");
        let route = routes::offer(id);
        let span = tracing::debug_span!("get_offer", offer = id);
        let answer = self
            .call(&what, MAX_ANSWER_BYTES, |http| {
                http.request(Method::GET, &route)
            })
            .instrument(span)
            .await?;
        match answer.status {
            StatusCode::OK => {
                let offer: Value = answer.json(&what)?;
                if !offer.is_object() {
                    return Err(Error::Unavailable(format!(
                        "{what} answered with something other than an offer"
                    )));
                }
                Ok(Some(offer))
            }
            StatusCode::NOT_FOUND => Ok(None),
            _ => Err(answer.unexpected(&what)),
        }
    }

    /// `POST /offer/{id}`: create or replace the offer (conditional on its
    /// `version`, if the body carries one).
    pub async fn put_offer(&mut self, id: &str, offer: &Value) -> Result<Written, Error> {
        let what = format!("POST /offer/{id}");
        let route = routes::offer(id);
        let span = tracing::info_span!("put_offer", offer = id);
        let answer = self
            .call(&what, MAX_ANSWER_BYTES, |http| {
                Ok(http.request(Method::POST, &route)?.json(offer))
            })
            .instrument(span)
            .await?;
        match answer.status {
            StatusCode::OK | StatusCode::CREATED => {
                // Only the version is needed; the rest of the stored offer
                // may be newer than this client.
                #[derive(Deserialize)]
                struct Stored {
                    version: u64,
                }
                let stored: Stored = answer.json(&what)?;
                Ok(Written {
                    created: answer.status == StatusCode::CREATED,
                    version: stored.version,
                })
            }
            StatusCode::FORBIDDEN => Err(Error::Forbidden(format!(
                "offer {id}: {}",
                answer.message()
            ))),
            StatusCode::CONFLICT => Err(Error::Conflict(answer.message())),
            StatusCode::BAD_REQUEST
            | StatusCode::PAYLOAD_TOO_LARGE
            | StatusCode::UNSUPPORTED_MEDIA_TYPE
            | StatusCode::UNPROCESSABLE_ENTITY => Err(answer.rejected("the offer")),
            _ => Err(answer.unexpected(&what)),
        }
    }

    /// `DELETE /offer/{id}`: withdraw the offer; `false` if there was none.
    pub async fn delete_offer(&mut self, id: &str) -> Result<bool, Error> {
        let what = format!("DELETE /offer/{id}");
        let route = routes::offer(id);
        let span = tracing::info_span!("delete_offer", offer = id);
        let answer = self
            .call(&what, MAX_ANSWER_BYTES, |http| {
                http.request(Method::DELETE, &route)
            })
            .instrument(span)
            .await?;
        match answer.status {
            status if status.is_success() => Ok(true),
            StatusCode::NOT_FOUND => Ok(false),
            StatusCode::FORBIDDEN => Err(Error::Forbidden(format!(
                "offer {id}: {}",
                answer.message()
            ))),
            _ => Err(answer.unexpected(&what)),
        }
    }
}
