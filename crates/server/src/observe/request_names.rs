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
    static CURRENT: Arc<str>;
}

/// Runs `f` (a request's handler) with `id` as its request id.
pub async fn scope<F: Future>(id: Arc<str>, f: F) -> F::Output {
    CURRENT.scope(id, f).await
}

/// The request id of the HTTP request this task serves, if any.
pub fn current() -> Option<Arc<str>> {
    CURRENT.try_with(Arc::clone).ok()
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
        scope("req-a".into(), async { names.record(2) }).await;
        assert_eq!(names.take(1), None);
        assert_eq!(names.take(2).as_deref(), Some("req-a"));
        assert_eq!(names.take(2), None);
    }
}
