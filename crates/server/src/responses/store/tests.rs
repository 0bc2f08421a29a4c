//! The store's bounds, continuation, deletion and cancellation.

use serde_json::json;

use super::*;
use crate::responses::object::ResponseSettings;

fn response(id: &str) -> ResponseObject {
    let settings = ResponseSettings {
        instructions: None,
        max_output_tokens: None,
        parallel_tool_calls: true,
        temperature: 1.0,
        top_p: 1.0,
        text: Default::default(),
        tool_choice: Default::default(),
        tools: Vec::new(),
    };
    let mut r = ResponseObject::in_progress(id.into(), 0, "m".into(), settings);
    r.status = ResponseStatus::Completed;
    r
}

fn limits(capacity: usize, ttl_ms: u64) -> StoreLimits {
    StoreLimits {
        capacity,
        ttl: Duration::from_millis(ttl_ms),
    }
}

#[test]
fn a_response_survives_a_thousand_others_within_the_default_bound() {
    let store = ResponseStore::new(StoreLimits::default());
    store.put(
        response("first"),
        vec![json!({"role": "user", "content": "hi"})],
        None,
    );
    for i in 0..1000 {
        store.put(response(&format!("r{i}")), Vec::new(), None);
    }
    assert!(store.get("first").is_some());
    let items = store.conversation("first").unwrap().unwrap();
    assert_eq!(items, vec![json!({"role": "user", "content": "hi"})]);
}

#[test]
fn the_oldest_go_first_past_the_capacity_and_everything_past_the_ttl() {
    let store = ResponseStore::new(limits(3, 60_000));
    for id in ["a", "b", "c", "d", "e"] {
        store.put(response(id), Vec::new(), None);
    }
    let kept: Vec<bool> = ["a", "b", "c", "d", "e"]
        .iter()
        .map(|id| store.get(id).is_some())
        .collect();
    assert_eq!(kept, [false, false, true, true, true]);
    // Storing "c" again makes it the newest: "d" goes before it.
    store.put(response("c"), Vec::new(), None);
    store.put(response("f"), Vec::new(), None);
    assert!(store.get("c").is_some() && store.get("d").is_none());

    let short = ResponseStore::new(limits(10, 20));
    short.put(response("x"), Vec::new(), None);
    assert!(short.get("x").is_some());
    std::thread::sleep(Duration::from_millis(40));
    assert!(short.get("x").is_none() && short.conversation("x").is_none());
    let off = ResponseStore::new(limits(0, 1000));
    off.put(response("y"), Vec::new(), None);
    assert!(!off.enabled() && off.get("y").is_none());
}

#[test]
fn deleting_removes_and_a_running_response_is_not_continued() {
    let store = ResponseStore::new(limits(8, 60_000));
    let mut running = response("bg");
    running.status = ResponseStatus::InProgress;
    store.put(
        running.clone(),
        vec![json!({"role": "user", "content": "q"})],
        None,
    );
    assert_eq!(
        store.conversation("bg"),
        Some(Err(ResponseStatus::InProgress))
    );
    let mut done = running;
    done.status = ResponseStatus::Completed;
    store.finish(
        done,
        vec![json!({"type": "message", "role": "assistant", "content": "a"})],
    );
    assert_eq!(store.conversation("bg").unwrap().unwrap().len(), 2);
    assert!(store.delete("bg"));
    assert!(!store.delete("bg"));
    assert!(store.get("bg").is_none());
}

#[tokio::test]
async fn cancelling_aborts_the_task_and_marks_the_response() {
    let store = ResponseStore::new(limits(8, 60_000));
    let task = tokio::spawn(std::future::pending::<()>());
    let mut running = response("bg");
    running.status = ResponseStatus::InProgress;
    store.put(running.clone(), Vec::new(), Some(task.abort_handle()));
    assert_eq!(
        store.cancel("bg").unwrap().status,
        ResponseStatus::Cancelled
    );
    assert!(task.await.unwrap_err().is_cancelled());
    assert_eq!(store.cancel("bg").unwrap_err(), CancelError::NotRunning);
    assert_eq!(store.cancel("nope").unwrap_err(), CancelError::NotFound);
    // A cancelled response's late finish changes nothing.
    store.finish(response("bg"), vec![json!({})]);
    assert_eq!(store.get("bg").unwrap().status, ResponseStatus::Cancelled);
}
