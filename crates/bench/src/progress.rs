//! A self-drawn progress line on stderr while a run is going (only on a terminal).

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Counters the runner updates and the progress line reads.
#[derive(Debug, Default)]
pub struct Progress {
    pub done: AtomicUsize,
    pub failed: AtomicUsize,
    pub in_flight: AtomicUsize,
    pub output_tokens: AtomicUsize,
}

/// Draws the line every 200 ms until the returned handle is dropped or aborted.
pub fn spawn(
    progress: Arc<Progress>,
    total: usize,
    limit: Duration,
) -> Option<tokio::task::JoinHandle<()>> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let start = Instant::now();
    Some(tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(200));
        loop {
            tick.tick().await;
            let line = render_line(&progress, total, start.elapsed(), limit);
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r{line}\x1b[K");
            let _ = err.flush();
        }
    }))
}

/// Wipes the line once the run is over.
pub fn clear() {
    if std::io::stderr().is_terminal() {
        let _ = write!(std::io::stderr().lock(), "\r\x1b[K");
    }
}

fn render_line(p: &Progress, total: usize, elapsed: Duration, limit: Duration) -> String {
    const WIDTH: usize = 30;
    let done = p.done.load(Ordering::Relaxed);
    let filled = (done * WIDTH).checked_div(total).unwrap_or(0).min(WIDTH);
    let secs = elapsed.as_secs_f64();
    let tokens = p.output_tokens.load(Ordering::Relaxed);
    format!(
        "[{}{}] {done}/{total} done, {} failed, {} in flight, {:.0} out tok/s, {secs:.0}/{} s",
        "#".repeat(filled),
        " ".repeat(WIDTH - filled),
        p.failed.load(Ordering::Relaxed),
        p.in_flight.load(Ordering::Relaxed),
        if secs > 0.0 {
            tokens as f64 / secs
        } else {
            0.0
        },
        limit.as_secs(),
    )
}
