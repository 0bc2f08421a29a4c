//! A small HTTP/1.1 client for one server: JSON GETs, and POSTs whose streamed body is read
//! frame by frame. Plain `http://` only: benchmark targets are local or on a private network,
//! and TLS would cost a dependency tree and skew latencies.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE};
use hyper::{Method, Request, Response, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::error::BenchError;

/// Short requests (model list, metrics) give up after this long.
const SHORT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone)]
pub struct HttpClient {
    inner: Client<HttpConnector, Full<Bytes>>,
    /// `http://host:port` plus any path prefix, without a trailing slash.
    base: String,
    api_key: Option<String>,
}

impl HttpClient {
    pub fn new(url: &str, api_key: Option<String>) -> Result<Self, BenchError> {
        let bad = |why: &str| BenchError::Url {
            url: url.to_string(),
            why: why.to_string(),
        };
        let uri: Uri = url.parse().map_err(|_| bad("not a URL"))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some("https") => return Err(bad("https is not supported; give an http:// URL")),
            _ => return Err(bad("give a URL such as http://127.0.0.1:8000")),
        }
        let authority = uri.authority().ok_or_else(|| bad("no host"))?;
        if uri.query().is_some() {
            return Err(bad("a query string has no place in the server's root URL"));
        }
        // Routes are joined to the server's root; accept the OpenAI-style `.../v1` base too.
        let path = uri.path().trim_end_matches('/');
        let path = path.strip_suffix("/v1").unwrap_or(path);
        let mut connector = HttpConnector::new();
        // Tokens arrive as small writes: Nagle's algorithm would batch them on our side.
        connector.set_nodelay(true);
        // A connection per request: servers may close a connection after a stream (llama-server
        // does), and a request sent on such a pooled connection fails. Connecting on loopback
        // costs well under a millisecond of TTFT, alike for every server.
        let inner = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(0)
            .build(connector);
        Ok(Self {
            inner,
            base: format!("http://{authority}{path}"),
            api_key,
        })
    }

    /// The absolute URL of a route (`/v1/models`) on this server.
    pub fn url(&self, route: &str) -> String {
        format!("{}{route}", self.base)
    }

    fn request(
        &self,
        method: Method,
        route: &str,
        body: Bytes,
    ) -> Result<Request<Full<Bytes>>, BenchError> {
        let url = self.url(route);
        let mut req = Request::builder().method(method).uri(&url);
        if !body.is_empty() {
            req = req.header(CONTENT_TYPE, "application/json");
        }
        if let Some(key) = &self.api_key {
            req = req.header(AUTHORIZATION, format!("Bearer {key}"));
        }
        req.body(Full::new(body)).map_err(|e| BenchError::Url {
            url,
            why: e.to_string(),
        })
    }

    /// GET a route and read its whole body (bounded by a short timeout).
    pub async fn get_text(&self, route: &str) -> Result<(u16, String), BenchError> {
        let url = self.url(route);
        let req = self.request(Method::GET, route, Bytes::new())?;
        let fetch = async {
            let resp = self
                .inner
                .request(req)
                .await
                .map_err(|e| http_error(&url, e))?;
            let status = resp.status().as_u16();
            let body = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| http_error(&url, e))?
                .to_bytes();
            Ok((status, String::from_utf8_lossy(&body).into_owned()))
        };
        tokio::time::timeout(SHORT_TIMEOUT, fetch)
            .await
            .map_err(|_| BenchError::Http {
                url: url.clone(),
                why: format!("no answer within {} s", SHORT_TIMEOUT.as_secs()),
            })?
    }

    /// POST a JSON body; the response's body is left to the caller to stream.
    pub async fn post_json(
        &self,
        route: &str,
        body: &serde_json::Value,
    ) -> Result<Response<Incoming>, BenchError> {
        let req = self.request(Method::POST, route, Bytes::from(body.to_string()))?;
        self.inner
            .request(req)
            .await
            .map_err(|e| http_error(&self.url(route), e))
    }
}

fn http_error(url: &str, e: impl std::error::Error) -> BenchError {
    // The interesting cause (connection refused, reset) sits at the bottom of the chain.
    let mut why = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        why = format!("{why}: {s}");
        source = s.source();
    }
    BenchError::Http {
        url: url.to_string(),
        why,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_join_the_server_root() {
        for base in [
            "http://127.0.0.1:8000",
            "http://127.0.0.1:8000/",
            "http://127.0.0.1:8000/v1",
            "http://127.0.0.1:8000/v1/",
        ] {
            let c = HttpClient::new(base, None).unwrap();
            assert_eq!(c.url("/v1/models"), "http://127.0.0.1:8000/v1/models");
        }
        let c = HttpClient::new("http://h:1/proxy/v1", None).unwrap();
        assert_eq!(c.url("/metrics"), "http://h:1/proxy/metrics");
    }

    #[test]
    fn only_plain_http_urls_are_accepted() {
        assert!(HttpClient::new("https://example.com", None).is_err());
        assert!(HttpClient::new("127.0.0.1:8000", None).is_err());
        assert!(HttpClient::new("http://h:1/?q=1", None).is_err());
        assert!(HttpClient::new("not a url", None).is_err());
    }
}
