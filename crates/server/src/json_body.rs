//! A JSON body extractor whose rejections are OpenAI error bodies (axum's own answer with plain
//! text, which OpenAI clients cannot parse).

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// Parses the body as JSON whatever the `Content-Type` says (curl users often forget it).
pub struct JsonBody<T>(pub T);

impl<S, T> FromRequest<S> for JsonBody<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|e| ApiError::bad_request(format!("could not read the request body: {e}")))?;
        parse_json(&bytes).map(JsonBody)
    }
}

/// serde's message names the field and the expected type, which is what a client needs to fix it.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| {
        let what = if e.is_syntax() || e.is_eof() {
            "malformed JSON"
        } else {
            "invalid request"
        };
        ApiError::bad_request(format!("{what}: {e}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    struct Probe {
        #[allow(dead_code)]
        max_tokens: u32,
    }

    #[test]
    fn malformed_and_mistyped_bodies_are_400_with_a_reason() {
        let syntax = parse_json::<Probe>(b"{\"max_tokens\": ").unwrap_err();
        assert_eq!(syntax.status, 400);
        assert!(
            syntax.message.starts_with("malformed JSON"),
            "{}",
            syntax.message
        );

        let typed = parse_json::<Probe>(b"{\"max_tokens\": \"ten\"}").unwrap_err();
        assert_eq!(typed.status, 400);
        assert!(typed.message.contains("invalid type"), "{}", typed.message);

        assert!(parse_json::<Probe>(b"{\"max_tokens\": 3}").is_ok());
    }
}
