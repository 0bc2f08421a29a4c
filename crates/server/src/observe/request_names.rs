//! The request id a client sees (its `X-Request-Id`, or the one the server made), carried from
//! the HTTP request to everything an engine request produces: the finished-request log line and
//! the span. Handlers run in the middleware's task-local scope, so the place that numbers
//! engine requests (`AppState::next_request_id`) records the name without every route passing
//! it down; the detokenizer thread takes it back by engine id.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};

use ferrite_engine::RequestId;

tokio::task_local! {
    static CURRENT: Arc<RequestName>;
}

/// An HTTP request's id while its handler runs: the header's or the server's, until the body
/// names one (vLLM's `request_id` field, which a client's `X-Request-Id` header overrides).
#[derive(Debug)]
pub struct RequestName {
    id: Mutex<Arc<str>>,
    /// The client sent the id in `X-Request-Id`: a body's `request_id` does not replace it.
    from_header: bool,
}

impl RequestName {
    pub fn new(id: Arc<str>, from_header: bool) -> Arc<Self> {
        Arc::new(Self {
            id: Mutex::new(id),
            from_header,
        })
    }

    pub fn get(&self) -> Arc<str> {
        Arc::clone(&self.id.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// Runs `f` (a request's handler) with `name` as its request id.
pub async fn scope<F: Future>(name: Arc<RequestName>, f: F) -> F::Output {
    CURRENT.scope(name, f).await
}

/// The request id of the HTTP request this task serves, if any.
pub fn current() -> Option<Arc<str>> {
    CURRENT.try_with(|n| n.get()).ok()
}

/// The body's `request_id` becomes this request's id, unless the client's header named one.
pub fn adopt_body_id(id: &str) {
    let _ = CURRENT.try_with(|name| {
        if !name.from_header {
            *name.id.lock().unwrap_or_else(|e| e.into_inner()) = Arc::from(id);
        }
    });
}

/// Names are taken back when the request's first output arrives; one whose engine request
/// never produced any (refused before it ran) would stay, so the map is bounded.
const MAX_NAMES: usize = 1 << 16;

/// Engine request id -> the client's request id, from submission to first output.
#[derive(Debug, Clone, Default)]
pub struct RequestNames(Arc<Mutex<HashMap<RequestId, Arc<str>>>>);

impl RequestNames {
    fn lock(&self) -> MutexGuard<'_, HashMap<RequestId, Arc<str>>> {
        // A poisoned map only holds names: keep using it.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Names engine request `id` after the HTTP request this task serves.
    pub fn record(&self, id: RequestId) {
        let Some(name) = current() else { return };
        let mut map = self.lock();
        if map.len() >= MAX_NAMES {
            // Only names that leaked can be this many (MAX_NAMES requests are not in flight
            // between submission and their first output): start over.
            map.clear();
        }
        map.insert(id, name);
    }

    pub fn take(&self, id: RequestId) -> Option<Arc<str>> {
        self.lock().remove(&id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_engine_request_takes_the_name_of_its_task() {
        let names = RequestNames::default();
        names.record(1);
        scope(RequestName::new("req-a".into(), false), async {
            names.record(2)
        })
        .await;
        assert_eq!(names.take(1), None);
        assert_eq!(names.take(2).as_deref(), Some("req-a"));
        assert_eq!(names.take(2), None);
    }

    #[tokio::test]
    async fn a_body_id_replaces_the_server_s_but_not_the_header_s() {
        let server = RequestName::new("random".into(), false);
        scope(Arc::clone(&server), async { adopt_body_id("mine") }).await;
        assert_eq!(&*server.get(), "mine");
        let header = RequestName::new("theirs".into(), true);
        scope(Arc::clone(&header), async {
            adopt_body_id("mine");
            assert_eq!(current().as_deref(), Some("theirs"));
        })
        .await;
        // Outside a request's scope there is nothing to rename.
        adopt_body_id("nobody");
        assert_eq!(current(), None);
    }
}
