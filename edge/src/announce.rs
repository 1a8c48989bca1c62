//! The line a server prints on stdout once it has bound a port.
//!
//! Binding port 0 lets the system choose a free port, which is the only
//! race-free way for a supervisor or a test to start a server beside
//! others; it then needs to learn the port. Every liqo-broker server prints
//! one line per bound port, on stdout (logs go to stderr), in one format:
//!
//! ```text
//! catalog listening on http://127.0.0.1:8080
//! resource-monitor metrics listening on http://127.0.0.1:9090
//! ```
//!
//! that is `<program>[ <role>] listening on <scheme>://<address>`, written
//! and flushed before the first connection is accepted. [`parse`] reads it
//! back.

use std::io::Write;
use std::net::SocketAddr;

const MARK: &str = " listening on ";

/// Print that this program (named as it was started; with its `role`, for
/// a second port) listens on `addr`. A closed stdout is ignored: the server
/// runs on regardless.
pub fn listening(role: Option<&str>, scheme: &str, addr: SocketAddr) {
    let line = line(&program(), role, scheme, addr);
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn program() -> String {
    std::env::args_os()
        .next()
        .as_deref()
        .map(std::path::Path::new)
        .and_then(|p| p.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "server".to_string())
}

fn line(program: &str, role: Option<&str>, scheme: &str, addr: SocketAddr) -> String {
    match role {
        Some(role) => format!("{program} {role}{MARK}{scheme}://{addr}"),
        None => format!("{program}{MARK}{scheme}://{addr}"),
    }
}

/// An announcement read back: who (`"catalog"`, `"resource-monitor
/// metrics"`) listens where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announcement {
    pub who: String,
    pub scheme: String,
    pub addr: SocketAddr,
}

/// Read one line of a server's stdout; `None` for any other line.
pub fn parse(line: &str) -> Option<Announcement> {
    let (who, url) = line.trim_end().split_once(MARK)?;
    let (scheme, addr) = url.split_once("://")?;
    Some(Announcement {
        who: who.to_string(),
        scheme: scheme.to_string(),
        addr: addr.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_reads_back_as_written() {
        let addr: SocketAddr = "127.0.0.1:43210".parse().unwrap();
        for role in [None, Some("metrics")] {
            let written = line("resource-monitor", role, "http", addr);
            let read = parse(&written).expect("an announcement");
            let who = match role {
                Some(r) => format!("resource-monitor {r}"),
                None => "resource-monitor".to_string(),
            };
            assert_eq!(read.who, who);
            assert_eq!(read.scheme, "http");
            assert_eq!(read.addr, addr);
        }
        let v6: SocketAddr = "[::1]:8080".parse().unwrap();
        assert_eq!(parse(&line("catalog", None, "http", v6)).unwrap().addr, v6);
    }

    #[test]
    fn other_lines_are_not_announcements() {
        for other in [
            "",
            "demo provider: clusterID=abc",
            "catalog listening on nowhere",
            "catalog listening on http://not-an-address",
        ] {
            assert_eq!(parse(other), None, "{other:?}");
        }
    }
}
