//! The publisher thread: what the scheduler thread's sink queued goes out as one batch per
//! wake-up on a ZMQ PUB socket, as vLLM's `ZmqEventPublisher` sends it: three frames, the
//! topic, the batch's sequence number (8 bytes, big-endian, from 0) and the msgpack batch.
//! The last `buffer_steps` batches are kept for the replay socket (a ROUTER): a request
//! `[8-byte big-endian first sequence]` is answered with `[seq, batch]` for every kept batch
//! from that one on, then `[-1 as 8 bytes, ""]`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use ferrite_engine::kv::KvEvent;
use tokio::sync::mpsc::Receiver;
use zeromq::{PubSocket, RouterSocket, Socket, SocketRecv, SocketSend, ZmqMessage};

use super::config::{endpoint, KvEventsConfig};
use super::encode::encode_batch;

/// The end-of-replay marker's sequence number.
const END_SEQ: i64 = -1;

pub struct Sockets {
    publish: PubSocket,
    replay: Option<RouterSocket>,
}

/// Binds (or connects) the sockets the configuration names.
pub async fn open(config: &KvEventsConfig) -> anyhow::Result<Sockets> {
    let mut publish = PubSocket::new();
    let (pub_endpoint, bind) = config.pub_endpoint();
    if bind {
        publish.bind(&pub_endpoint).await?;
    } else {
        publish.connect(&pub_endpoint).await?;
    }
    let replay = match &config.replay_endpoint {
        Some(raw) => {
            let mut router = RouterSocket::new();
            router.bind(&endpoint(raw).0).await?;
            Some(router)
        }
        None => None,
    };
    Ok(Sockets { publish, replay })
}

/// Runs until every sender of `events` is gone.
pub async fn run(
    mut sockets: Sockets,
    config: KvEventsConfig,
    mut events: Receiver<KvEvent>,
    overflowed: Arc<AtomicBool>,
) {
    let topic = Bytes::from(config.topic.clone().into_bytes());
    let mut kept: VecDeque<(u64, Bytes)> = VecDeque::new();
    let mut next_seq = 0u64;
    loop {
        let replay_request = async {
            match &mut sockets.replay {
                Some(router) => router.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            first = events.recv() => {
                let Some(first) = first else { return };
                let mut batch = Vec::new();
                if overflowed.swap(false, Ordering::Relaxed) {
                    // Events were dropped: consumers must forget what they knew of this cache.
                    tracing::error!("KV-event queue overflowed; publishing AllBlocksCleared");
                    batch.push(KvEvent::AllBlocksCleared);
                }
                batch.push(first);
                while let Ok(more) = events.try_recv() {
                    batch.push(more);
                }
                let payload = Bytes::from(encode_batch(unix_now(), &batch, 0));
                let seq = next_seq;
                next_seq += 1;
                let frames = vec![topic.clone(), seq_frame(seq as i64), payload.clone()];
                if let Err(error) = send(&mut sockets.publish, frames).await {
                    tracing::error!(%error, "cannot publish KV events");
                }
                kept.push_back((seq, payload));
                if kept.len() > config.buffer_steps {
                    kept.pop_front();
                }
            }
            request = replay_request => match request {
                Ok(request) => {
                    if let Some(router) = &mut sockets.replay {
                        if let Err(error) = replay(router, request, &kept).await {
                            tracing::warn!(%error, "KV-event replay failed");
                        }
                    }
                }
                Err(error) => tracing::warn!(%error, "bad KV-event replay request"),
            }
        }
    }
}

/// `request`: `[identity, "", first_seq]` (a REQ client's delimiter) or `[identity,
/// first_seq]` (a DEALER without one); the answers carry the same envelope.
async fn replay(
    router: &mut RouterSocket,
    request: ZmqMessage,
    kept: &VecDeque<(u64, Bytes)>,
) -> anyhow::Result<()> {
    let frames = request.into_vec();
    let (envelope, start) = match frames.as_slice() {
        [identity, empty, start] if empty.is_empty() => {
            (vec![identity.clone(), empty.clone()], start)
        }
        [identity, start] => (vec![identity.clone()], start),
        _ => anyhow::bail!(
            "expected [identity, \"\", 8-byte sequence], got {} frames",
            frames.len()
        ),
    };
    let start: [u8; 8] = start
        .as_ref()
        .try_into()
        .map_err(|_| anyhow::anyhow!("the sequence number must be 8 bytes"))?;
    let start = u64::from_be_bytes(start);
    for (seq, payload) in kept.iter().filter(|(seq, _)| *seq >= start) {
        let mut frames = envelope.clone();
        frames.extend([seq_frame(*seq as i64), payload.clone()]);
        send(router, frames).await?;
    }
    let mut end = envelope;
    end.extend([seq_frame(END_SEQ), Bytes::new()]);
    send(router, end).await
}

async fn send(socket: &mut impl SocketSend, frames: Vec<Bytes>) -> anyhow::Result<()> {
    let message = ZmqMessage::try_from(frames).map_err(|e| anyhow::anyhow!("{e:?}"))?;
    socket.send(message).await?;
    Ok(())
}

fn seq_frame(seq: i64) -> Bytes {
    Bytes::copy_from_slice(&seq.to_be_bytes())
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
