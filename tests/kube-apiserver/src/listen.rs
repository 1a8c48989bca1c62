//! The accept loop: each TCP connection served over HTTP/1.1, in plain text
//! or behind TLS ([`crate::tls`]), with the user of its client certificate
//! (if any) handed to every request on it. Hand-rolled rather than
//! `axum::serve` because the TLS session — who the peer is — has to reach
//! the handler, and a response body that fails must close the connection
//! (how [`crate::faults::Fault::reset`] and reset watches cut it).

use std::sync::Arc;

use axum::Router;
use hyper::body::Incoming;
use hyper::Request;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tower::ServiceExt;

use crate::shared::ClientCertUser;
use crate::tls::Pki;

/// Serve `app` on every connection `listener` accepts, until aborted.
pub async fn serve(listener: TcpListener, app: Router, tls: Option<Arc<Pki>>) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let app = app.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            match tls {
                None => connection(TokioIo::new(tcp), app, None).await,
                Some(pki) => {
                    let acceptor = tokio_rustls::TlsAcceptor::from(pki.server_config.clone());
                    // A client that does not trust our CA (or sends a
                    // certificate it did not issue) fails here, as against
                    // a real server: no HTTP request is ever made.
                    let Ok(stream) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let user = stream
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|chain| chain.first())
                        .and_then(|der| pki.user_of(der))
                        .map(ClientCertUser);
                    connection(TokioIo::new(stream), app, user).await
                }
            }
        });
    }
}

async fn connection<I>(io: TokioIo<I>, app: Router, user: Option<ClientCertUser>)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
        if let Some(user) = &user {
            request.extensions_mut().insert(user.clone());
        }
        app.clone().oneshot(request)
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(io, service)
        .await;
}
