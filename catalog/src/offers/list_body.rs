//! The `GET /offers` body as sent: an `ETag` (a hash of the JSON, so it
//! changes with every write that changes the list, and never lags a write
//! this process just made), `If-None-Match` answered 304, and the body
//! compressed with br or gzip when the client accepts it. Compressed bodies
//! are cached per ETag and encoding, so a list that has not changed is
//! compressed once however many clients fetch it.

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use actix_web::http::header::{self, HeaderMap};
use actix_web::{HttpResponse, HttpResponseBuilder};
use sha2::{Digest, Sha256};

/// Bodies shorter than this are sent as they are.
pub const MIN_COMPRESSED: usize = 512;
/// Compressed bodies kept (lists × encodings); past it the cache starts over.
const CACHED_BODIES: usize = 64;

/// A content encoding the list is sent with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    Brotli,
    Gzip,
}

impl Encoding {
    fn token(self) -> &'static str {
        match self {
            Encoding::Brotli => "br",
            Encoding::Gzip => "gzip",
        }
    }
}

/// The strong ETag of `body`: the first 128 bits of its SHA-256, quoted.
pub fn etag_of(body: &[u8]) -> String {
    let digest = Sha256::digest(body);
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
}

/// Whether `If-None-Match` (any of its values) names `etag`, or is `*`.
/// Weak tags match too (the comparison `If-None-Match` asks for).
pub fn none_match(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim())
        .any(|t| t == "*" || t.strip_prefix("W/").unwrap_or(t) == etag)
}

/// The encoding to send: br if accepted, else gzip, else none. A coding
/// with `q=0` is refused; `*` accepts both.
pub fn negotiate(headers: &HeaderMap) -> Option<Encoding> {
    let mut accepted = Vec::new();
    for value in headers
        .get_all(header::ACCEPT_ENCODING)
        .filter_map(|v| v.to_str().ok())
    {
        for item in value.split(',') {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let refused = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            if !refused {
                accepted.push(coding);
            }
        }
    }
    let takes = |c: &str| accepted.iter().any(|a| a == c || a == "*");
    if takes("br") {
        Some(Encoding::Brotli)
    } else if takes("gzip") {
        Some(Encoding::Gzip)
    } else {
        None
    }
}

/// Compress `body` with `encoding`.
pub fn compress(body: &[u8], encoding: Encoding) -> std::io::Result<Vec<u8>> {
    match encoding {
        Encoding::Gzip => {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            enc.write_all(body)?;
            enc.finish()
        }
        Encoding::Brotli => {
            let mut out = Vec::new();
            {
                // Quality 5, 4 MiB window: a good ratio at a fraction of the
                // default quality's cost.
                let mut enc = brotli::CompressorWriter::new(&mut out, 64 * 1024, 5, 22);
                enc.write_all(body)?;
                enc.flush()?;
            }
            Ok(out)
        }
    }
}

type Cache = Mutex<HashMap<(String, Encoding), Arc<Vec<u8>>>>;

fn cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// `body` compressed with `encoding`, from the cache when this ETag was
/// compressed before.
fn compressed(etag: &str, body: &[u8], encoding: Encoding) -> std::io::Result<Arc<Vec<u8>>> {
    let key = (etag.to_string(), encoding);
    if let Some(hit) = cache().lock().ok().and_then(|c| c.get(&key).cloned()) {
        return Ok(hit);
    }
    let out = Arc::new(compress(body, encoding)?);
    if let Ok(mut c) = cache().lock() {
        if c.len() >= CACHED_BODIES {
            c.clear();
        }
        c.insert(key, out.clone());
    }
    Ok(out)
}

/// Answer with the JSON `body` through `response` (status and other
/// headers set): 304 if the request's `If-None-Match` names its ETag,
/// else the body, compressed when accepted and worth it.
pub fn respond(
    request: &HeaderMap,
    mut response: HttpResponseBuilder,
    body: Vec<u8>,
) -> std::io::Result<HttpResponse> {
    let etag = etag_of(&body);
    response.insert_header((header::ETAG, etag.clone()));
    response.insert_header((header::VARY, "Accept-Encoding"));
    if none_match(request, &etag) {
        return Ok(response
            .status(actix_web::http::StatusCode::NOT_MODIFIED)
            .finish());
    }
    response.insert_header((header::CONTENT_TYPE, "application/json"));
    match negotiate(request).filter(|_| body.len() >= MIN_COMPRESSED) {
        Some(encoding) => {
            let out = compressed(&etag, &body, encoding)?;
            response.insert_header((header::CONTENT_ENCODING, encoding.token()));
            Ok(response.body(out.as_ref().clone()))
        }
        None => Ok(response.body(body)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::http::header::{HeaderName, HeaderValue};
    use std::io::Read;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(HeaderName::from_static(k), HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn encodings_are_negotiated() {
        let pick = |v| negotiate(&headers(&[("accept-encoding", v)]));
        assert_eq!(pick("gzip, deflate, br"), Some(Encoding::Brotli));
        assert_eq!(pick("gzip"), Some(Encoding::Gzip));
        assert_eq!(pick("br;q=0, gzip;q=0.5"), Some(Encoding::Gzip));
        assert_eq!(pick("br;q=0,gzip;q=0"), None);
        assert_eq!(pick("identity"), None);
        assert_eq!(pick("*"), Some(Encoding::Brotli));
        assert_eq!(negotiate(&HeaderMap::new()), None);
    }

    #[test]
    fn if_none_match_compares_tags() {
        let tag = etag_of(b"[]");
        assert_ne!(tag, etag_of(b"[ ]"));
        let matches = |v| none_match(&headers(&[("if-none-match", v)]), &tag);
        assert!(!matches("\"other\""));
        assert!(matches("*"));
        let listed: &'static str = Box::leak(format!("\"x\", W/{tag}").into_boxed_str());
        assert!(matches(listed));
    }

    #[test]
    fn compressed_bodies_decode_to_the_same_bytes() {
        let body = br#"{"offers":"many"}"#.repeat(200);
        let gz = compress(&body, Encoding::Gzip).unwrap();
        let mut back = Vec::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(back, body);
        let br = compress(&body, Encoding::Brotli).unwrap();
        let mut back = Vec::new();
        brotli::Decompressor::new(&br[..], 4096)
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(back, body);
        assert!(br.len() < body.len() / 10 && gz.len() < body.len() / 10);
    }
}
