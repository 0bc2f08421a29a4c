//! Stored responses (`store`, on by default as in OpenAI's API): what `previous_response_id`
//! continues, `GET /v1/responses/{id}` returns and `DELETE` removes, and where a `background`
//! response is polled. In memory, bounded: at most `capacity` responses and `max_bytes` of
//! them (an agent's every turn holds its whole conversation), each for `ttl`; past any bound
//! the oldest go first.
//!
//! Each entry keeps the response object as the client sees it (JSON) and the conversation as
//! Responses items (what `input` takes): the earlier turns' items, this request's input and
//! the response's output, so a continuation is its predecessor's items followed by the new
//! input, rendered like any stateless request. The store knows no Responses types: it sits
//! in the server's state, below the routes that fill it.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::task::AbortHandle;

/// The store's bounds (`--responses-store-capacity`, `--responses-store-ttl`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreLimits {
    /// Responses kept at most; 0 keeps none (`store` is then refused).
    pub capacity: usize,
    /// Bytes of responses and conversations kept at most (their JSON).
    pub max_bytes: usize,
    pub ttl: Duration,
}

impl Default for StoreLimits {
    fn default() -> Self {
        Self {
            capacity: 4096,
            max_bytes: 256 << 20,
            ttl: Duration::from_secs(3600),
        }
    }
}

struct Entry {
    /// The response object as served.
    response: Value,
    /// A background response still being generated.
    running: bool,
    /// The conversation up to and including this response's output, as input items.
    items: Vec<Value>,
    stored_at: Instant,
    /// A background response still running: its task, to cancel.
    task: Option<AbortHandle>,
    /// What it counts against `max_bytes`.
    bytes: usize,
}

/// The JSON size of an entry's response and conversation.
fn size_of(response: &Value, items: &[Value]) -> usize {
    let len = |v: &Value| serde_json::to_vec(v).map_or(0, |b| b.len());
    len(response) + items.iter().map(len).sum::<usize>()
}

#[derive(Default)]
struct Inner {
    entries: HashMap<String, Entry>,
    /// The entries' `bytes`, summed.
    bytes: usize,
    /// Ids, oldest first (an id may appear again after a re-store; stale ones are skipped).
    order: VecDeque<(String, Instant)>,
}

pub struct ResponseStore {
    limits: StoreLimits,
    inner: Mutex<Inner>,
}

/// Why a response cannot be cancelled.
#[derive(Debug, PartialEq, Eq)]
pub enum CancelError {
    NotFound,
    NotRunning,
}

/// A continuation asked for a response that is still being generated.
#[derive(Debug, PartialEq, Eq)]
pub struct StillRunning;

impl ResponseStore {
    pub fn new(limits: StoreLimits) -> Self {
        Self {
            limits,
            inner: Mutex::new(Inner::default()),
        }
    }

    pub fn enabled(&self) -> bool {
        self.limits.capacity > 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves the map consistent (every change is one insert
        // or remove): keep serving.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps response `id` (its JSON) with its conversation `items`, replacing an entry of
    /// the same id; `task`: the background task still generating it.
    pub fn put(&self, id: &str, response: Value, items: Vec<Value>, task: Option<AbortHandle>) {
        if !self.enabled() {
            return;
        }
        let now = Instant::now();
        let mut inner = self.lock();
        let id = id.to_string();
        inner.order.push_back((id.clone(), now));
        let bytes = size_of(&response, &items);
        let entry = Entry {
            response,
            running: task.is_some(),
            items,
            stored_at: now,
            task,
            bytes,
        };
        inner.bytes += bytes;
        if let Some(old) = inner.entries.insert(id, entry) {
            inner.bytes -= old.bytes;
        }
        self.evict(&mut inner, now);
    }

    /// A background response's end: its final object and output, unless it was cancelled or
    /// deleted meanwhile.
    pub fn finish(&self, id: &str, response: Value, output_items: Vec<Value>) {
        let mut inner = self.lock();
        let mut grew = 0;
        if let Some(entry) = inner.entries.get_mut(id).filter(|e| e.running) {
            entry.items.extend(output_items);
            entry.response = response;
            entry.running = false;
            entry.task = None;
            let bytes = size_of(&entry.response, &entry.items);
            grew = bytes.saturating_sub(entry.bytes);
            entry.bytes = bytes;
        }
        inner.bytes += grew;
        self.evict(&mut inner, Instant::now());
    }

    /// The stored response, if it is there and not expired.
    pub fn get(&self, id: &str) -> Option<Value> {
        let mut inner = self.lock();
        self.evict(&mut inner, Instant::now());
        inner.entries.get(id).map(|e| e.response.clone())
    }

    /// The conversation to continue after response `id`: `None` if unknown or expired.
    pub fn conversation(&self, id: &str) -> Option<Result<Vec<Value>, StillRunning>> {
        let mut inner = self.lock();
        self.evict(&mut inner, Instant::now());
        let entry = inner.entries.get(id)?;
        Some(match entry.running {
            true => Err(StillRunning),
            false => Ok(entry.items.clone()),
        })
    }

    /// Removes response `id` (cancelling it if it still runs); whether it was there.
    pub fn delete(&self, id: &str) -> bool {
        let removed = {
            let mut inner = self.lock();
            let removed = inner.entries.remove(id);
            inner.bytes -= removed.as_ref().map_or(0, |e| e.bytes);
            removed
        };
        if let Some(task) = removed.as_ref().and_then(|e| e.task.as_ref()) {
            task.abort();
        }
        removed.is_some()
    }

    /// Cancels a running background response: its task is aborted (and with it the engine
    /// request) and its `status` becomes `cancelled`.
    pub fn cancel(&self, id: &str) -> Result<Value, CancelError> {
        let mut inner = self.lock();
        let entry = inner.entries.get_mut(id).ok_or(CancelError::NotFound)?;
        let task = entry.task.take().ok_or(CancelError::NotRunning)?;
        task.abort();
        entry.running = false;
        entry.response["status"] = Value::String("cancelled".into());
        Ok(entry.response.clone())
    }

    /// Drops what is past the TTL, then the oldest while over a bound.
    fn evict(&self, inner: &mut Inner, now: Instant) {
        while let Some((id, at)) = inner.order.front().cloned() {
            let current = inner.entries.get(&id).is_some_and(|e| e.stored_at == at);
            let expired = now.duration_since(at) > self.limits.ttl;
            let over =
                inner.entries.len() > self.limits.capacity || inner.bytes > self.limits.max_bytes;
            if current && !expired && !over {
                break;
            }
            inner.order.pop_front();
            if current {
                if let Some(entry) = inner.entries.remove(&id) {
                    inner.bytes -= entry.bytes;
                    if let Some(task) = entry.task {
                        task.abort();
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
