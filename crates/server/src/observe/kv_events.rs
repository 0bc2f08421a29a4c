//! KV-cache events as vLLM publishes them (`--kv-events-config`), for KV-aware routers: llm-d's
//! precise prefix-cache scorer, NVIDIA Dynamo's KV router. The engine's prefix cache reports
//! blocks stored and evicted to a [`KvEventSink`]; the sink here queues them (never blocking
//! the scheduler thread) for a publisher thread that owns the ZMQ sockets.
//!
//! The block hashing is the engine's (`ferrite_engine::kv::events`); the wire format is in
//! [`encode`], the sockets and sequence numbers in [`publisher`].

mod config;
mod encode;
mod publisher;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ferrite_engine::kv::{KvEvent, KvEventSink};
use tokio::sync::mpsc::{self, error::TrySendError};

pub use config::KvEventsConfig;
pub use encode::encode_batch;

/// What the engine's prefix cache emits into: a bounded queue to the publisher thread. When
/// it is full the event is dropped and the publisher sends `AllBlocksCleared` next, so that
/// consumers never believe in a block they were not told about correctly.
#[derive(Debug)]
pub struct QueueSink {
    queue: mpsc::Sender<KvEvent>,
    overflowed: Arc<AtomicBool>,
}

impl KvEventSink for QueueSink {
    fn emit(&mut self, event: KvEvent) {
        match self.queue.try_send(event) {
            Ok(()) | Err(TrySendError::Closed(_)) => {}
            Err(TrySendError::Full(_)) => self.overflowed.store(true, Ordering::Relaxed),
        }
    }
}

/// Opens the sockets (an error here stops the server: a wrong endpoint is a wrong
/// deployment) and starts the publisher thread; returns the sink to give the engine.
pub fn start(config: KvEventsConfig) -> anyhow::Result<QueueSink> {
    let (queue, events) = mpsc::channel(config.max_queue_size);
    let overflowed = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&overflowed);
    let (opened_tx, opened_rx) = std::sync::mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("ferrite-kv-events".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(e) => return drop(opened_tx.send(Err(anyhow::Error::from(e)))),
            };
            runtime.block_on(async move {
                match publisher::open(&config).await {
                    Ok(sockets) => {
                        let _ = opened_tx.send(Ok(()));
                        publisher::run(sockets, config, events, flag).await;
                    }
                    Err(e) => drop(opened_tx.send(Err(e))),
                }
            });
        })?;
    opened_rx
        .recv()
        .map_err(|_| anyhow::anyhow!("the KV-event publisher thread died"))??;
    Ok(QueueSink { queue, overflowed })
}
