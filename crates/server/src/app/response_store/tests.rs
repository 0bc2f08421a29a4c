//! The store's bounds, continuation, deletion and cancellation.

use serde_json::json;

use super::*;

fn response(id: &str) -> Value {
    json!({"id": id, "object": "response", "status": "completed"})
}

fn limits(capacity: usize, ttl_ms: u64) -> StoreLimits {
    StoreLimits {
        capacity,
        ttl: Duration::from_millis(ttl_ms),
        ..StoreLimits::default()
    }
}

#[test]
fn the_oldest_go_first_past_the_byte_bound() {
    let store = ResponseStore::new(StoreLimits {
        max_bytes: 10_000,
        ..StoreLimits::default()
    });
    let turn = |i: usize| vec![json!({"role": "user", "content": "x".repeat(3000 + i)})];
    for i in 0..5 {
        store.put(&format!("r{i}"), response(&format!("r{i}")), turn(i), None);
    }
    let kept: Vec<bool> = (0..5)
        .map(|i| store.get(&format!("r{i}")).is_some())
        .collect();
    // About 3 KB each: three fit in 10 KB.
    assert_eq!(kept, [false, false, true, true, true]);
    assert!(store.delete("r4"));
    store.put("r5", response("r5"), turn(5), None);
    assert!(store.get("r2").is_some() && store.get("r5").is_some());
}

#[test]
fn a_response_survives_a_thousand_others_within_the_default_bound() {
    let store = ResponseStore::new(StoreLimits::default());
    store.put(
        "first",
        response("first"),
        vec![json!({"role": "user", "content": "hi"})],
        None,
    );
    for i in 0..1000 {
        store.put(
            &format!("r{i}"),
            response(&format!("r{i}")),
            Vec::new(),
            None,
        );
    }
    assert!(store.get("first").is_some());
    let items = store.conversation("first").unwrap().unwrap();
    assert_eq!(items, vec![json!({"role": "user", "content": "hi"})]);
}

#[test]
fn the_oldest_go_first_past_the_capacity_and_everything_past_the_ttl() {
    let store = ResponseStore::new(limits(3, 60_000));
    for id in ["a", "b", "c", "d", "e"] {
        store.put(id, response(id), Vec::new(), None);
    }
    let kept: Vec<bool> = ["a", "b", "c", "d", "e"]
        .iter()
        .map(|id| store.get(id).is_some())
        .collect();
    assert_eq!(kept, [false, false, true, true, true]);
    // Storing "c" again makes it the newest: "d" goes before it.
    store.put("c", response("c"), Vec::new(), None);
    store.put("f", response("f"), Vec::new(), None);
    assert!(store.get("c").is_some() && store.get("d").is_none());

    let short = ResponseStore::new(limits(10, 20));
    short.put("x", response("x"), Vec::new(), None);
    assert!(short.get("x").is_some());
    std::thread::sleep(Duration::from_millis(40));
    assert!(short.get("x").is_none() && short.conversation("x").is_none());
    let off = ResponseStore::new(limits(0, 1000));
    off.put("y", response("y"), Vec::new(), None);
    assert!(!off.enabled() && off.get("y").is_none());
}

#[tokio::test]
async fn deleting_removes_and_a_running_response_is_not_continued() {
    let store = ResponseStore::new(limits(8, 60_000));
    let task = tokio::spawn(std::future::pending::<()>());
    let running = json!({"id": "bg", "status": "in_progress"});
    let question = vec![json!({"role": "user", "content": "q"})];
    store.put("bg", running, question, Some(task.abort_handle()));
    assert_eq!(store.conversation("bg"), Some(Err(StillRunning)));
    let answer = vec![json!({"type": "message", "role": "assistant", "content": "a"})];
    store.finish("bg", response("bg"), answer);
    assert_eq!(store.conversation("bg").unwrap().unwrap().len(), 2);
    assert!(store.delete("bg"));
    assert!(!store.delete("bg"));
    assert!(store.get("bg").is_none());
}

#[tokio::test]
async fn cancelling_aborts_the_task_and_marks_the_response() {
    let store = ResponseStore::new(limits(8, 60_000));
    let task = tokio::spawn(std::future::pending::<()>());
    let running = json!({"id": "bg", "status": "in_progress"});
    store.put("bg", running, Vec::new(), Some(task.abort_handle()));
    assert_eq!(store.cancel("bg").unwrap()["status"], "cancelled");
    assert!(task.await.unwrap_err().is_cancelled());
    assert_eq!(store.cancel("bg").unwrap_err(), CancelError::NotRunning);
    assert_eq!(store.cancel("nope").unwrap_err(), CancelError::NotFound);
    // A cancelled response's late finish changes nothing.
    store.finish("bg", response("bg"), vec![json!({})]);
    assert_eq!(store.get("bg").unwrap()["status"], "cancelled");
}
