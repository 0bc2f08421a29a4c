//! Running a benchmark: discover the model, issue the workload's requests under the arrival
//! process and the concurrency limit, stop at the count or the time limit, and summarize.
//!
//! Sessions: a run starts enough sessions to make `--num-requests` requests
//! (⌈requests / turns⌉). Whenever an arrival is due and a slot is free, the next request is a
//! follow-up turn whose previous answer has arrived, else the first turn of a session not yet
//! started, else the arrival waits until some answer arrives. A session whose request failed
//! ends, and a fresh one replaces it.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::task::JoinSet;
use tokio::time::{sleep_until, Instant};

use crate::arrival::Arrivals;
use crate::client::HttpClient;
use crate::config::{BenchConfig, WorkloadKind};
use crate::error::BenchError;
use crate::progress::{self, Progress};
use crate::record::{Outcome, RequestRecord};
use crate::report::{summarize, BenchReport, RunEnd, RunInfo};
use crate::request::{self, RequestOptions};
use crate::server_metrics;
use crate::session::Session;
use crate::text::TokenCounter;
use crate::workload::WorkloadGen;

/// Runs the benchmark `config` describes against its server.
pub async fn run(
    config: &BenchConfig,
    counter: Arc<dyn TokenCounter>,
) -> Result<BenchReport, BenchError> {
    config.validate()?;
    let client = HttpClient::new(&config.url, config.api_key.clone())?;
    let model = match &config.model {
        Some(m) => m.clone(),
        None => discover_model(&client).await?,
    };
    let mut workload = WorkloadGen::new(config, Arc::clone(&counter))?;
    let info = RunInfo {
        url: client.url(""),
        model: model.clone(),
        endpoint: config.endpoint,
        workload: workload.describe(),
        lengths: (config.workload != WorkloadKind::Replay).then(|| workload.lengths()),
        num_requests: config.num_requests,
        request_rate: config.request_rate,
        max_concurrency: config.max_concurrency,
        max_duration_s: config.max_duration.as_secs_f64(),
        seed: config.seed,
        ignore_eos: config.ignore_eos,
        token_counter: counter.describe(),
    };
    let opts = Arc::new(RequestOptions {
        model,
        endpoint: config.endpoint,
        ignore_eos: config.ignore_eos,
        temperature: config.temperature,
    });
    let before = server_metrics::scrape(&client).await;
    let (records, end) = dispatch(&client, opts, &mut workload, config).await;
    let after = server_metrics::scrape(&client).await;
    let cache = match (before, after) {
        (Some(b), Some(a)) => server_metrics::delta(&b, &a),
        _ => None,
    };
    Ok(summarize(info, records, end, config.slo.clone(), cache))
}

/// The first model `GET /v1/models` lists.
pub async fn discover_model(client: &HttpClient) -> Result<String, BenchError> {
    let url = client.url("/v1/models");
    let (status, body) = client.get_text("/v1/models").await?;
    if status != 200 {
        return Err(BenchError::Status { url, status, body });
    }
    serde_json::from_str::<Value>(&body)
        .ok()
        .and_then(|v| v["data"][0]["id"].as_str().map(str::to_owned))
        .ok_or_else(|| BenchError::Status {
            url,
            status,
            body: format!("no model listed in {body}; give --model"),
        })
}

async fn dispatch(
    client: &HttpClient,
    opts: Arc<RequestOptions>,
    workload: &mut WorkloadGen,
    config: &BenchConfig,
) -> (Vec<RequestRecord>, RunEnd) {
    let sessions = config.num_requests.div_ceil(workload.turns_per_session());
    let mut fresh: VecDeque<Session> = (0..sessions)
        .map_while(|_| workload.next_session())
        .collect();
    let planned = config
        .num_requests
        .min(fresh.len() * workload.turns_per_session());
    let mut followups: VecDeque<Session> = VecDeque::new();
    let mut arrivals = Arrivals::new(config.request_rate, config.seed);
    let limit = config.max_concurrency.unwrap_or(usize::MAX);
    let progress = Arc::new(Progress::default());
    let bar = config
        .progress
        .then(|| progress::spawn(Arc::clone(&progress), planned, config.max_duration))
        .flatten();

    let start = Instant::now();
    let deadline = start + config.max_duration;
    let mut next_due = start;
    let mut tasks: JoinSet<(Session, RequestRecord)> = JoinSet::new();
    // Which request each task sends, to account for a task that dies.
    let mut sending: HashMap<tokio::task::Id, (usize, usize, f64)> = HashMap::new();
    let mut records = Vec::with_capacity(planned);
    let mut issued = 0usize;
    let mut hit_deadline = false;
    loop {
        // Checked here too: a long burst of immediately due requests never reaches the select.
        if Instant::now() >= deadline {
            hit_deadline = true;
            break;
        }
        let next = followups.front().or(fresh.front());
        let done_issuing = issued >= planned || (next.is_none() && tasks.is_empty());
        if done_issuing && tasks.is_empty() {
            break;
        }
        let due = next
            .and_then(|s| s.arrival)
            .map_or(next_due, |a| start + Duration::from_secs_f64(a));
        let can_issue = !done_issuing && next.is_some() && tasks.len() < limit;
        if can_issue && Instant::now() >= due {
            let Some(mut session) = followups.pop_front().or_else(|| fresh.pop_front()) else {
                continue;
            };
            let Some(spec) = session.next_request(config.endpoint) else {
                continue;
            };
            issued += 1;
            let sent = (
                spec.session,
                spec.turn,
                (Instant::now() - start).as_secs_f64(),
            );
            if session.arrival.is_none() {
                next_due += Duration::from_secs_f64(arrivals.next_gap());
            }
            let (client, opts) = (client.clone(), Arc::clone(&opts));
            let origin = start.into_std();
            let handle = tasks.spawn(async move {
                let record = request::send(&client, &spec, &opts, origin).await;
                (session, record)
            });
            sending.insert(handle.id(), sent);
            progress.in_flight.store(tasks.len(), Ordering::Relaxed);
            continue;
        }
        tokio::select! {
            biased;
            _ = sleep_until(deadline) => {
                hit_deadline = true;
                break;
            }
            Some(joined) = tasks.join_next_with_id(), if !tasks.is_empty() => {
                let record = match joined {
                    Ok((id, (mut session, record))) => {
                        sending.remove(&id);
                        if session.has_more_turns() {
                            if record.succeeded() {
                                session.record_answer(record.text.clone(), record.output_tokens);
                                followups.push_back(session);
                            } else {
                                fresh.extend(workload.next_session());
                            }
                        }
                        record
                    }
                    Err(e) => lost_task(sending.remove(&e.id()), &e.to_string()),
                };
                note(&progress, &record, tasks.len());
                records.push(record);
            }
            _ = sleep_until(due), if can_issue => {}
        }
    }
    let mut cancelled = 0;
    if hit_deadline {
        tasks.abort_all();
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok((_, record)) => records.push(record),
                Err(_) => cancelled += 1,
            }
        }
    }
    let duration_s = start.elapsed().as_secs_f64();
    if let Some(bar) = bar {
        bar.abort();
        progress::clear();
    }
    let not_sent = planned - issued;
    let stopped_early = hit_deadline.then(|| {
        format!(
            "the {:.0} s limit (--max-duration) was reached: {cancelled} requests cancelled, \
             {not_sent} not sent",
            config.max_duration.as_secs_f64()
        )
    });
    let end = RunEnd {
        duration_s,
        cancelled,
        not_sent,
        stopped_early,
    };
    (records, end)
}

fn note(progress: &Progress, record: &RequestRecord, in_flight: usize) {
    progress.done.fetch_add(1, Ordering::Relaxed);
    if !record.succeeded() {
        progress.failed.fetch_add(1, Ordering::Relaxed);
    }
    progress
        .output_tokens
        .fetch_add(record.output_tokens, Ordering::Relaxed);
    progress.in_flight.store(in_flight, Ordering::Relaxed);
}

/// A record for a request whose task died without one (it cannot panic by design; if it does,
/// the run goes on and the failure shows in the report).
fn lost_task(sent: Option<(usize, usize, f64)>, why: &str) -> RequestRecord {
    let (session, turn, sent_at) = sent.unwrap_or_default();
    RequestRecord {
        session,
        turn,
        sent_at,
        outcome: Outcome::Failed(format!("the request's task failed: {why}")),
        ttft: None,
        itls: Vec::new(),
        e2e: 0.0,
        prompt_tokens: 0,
        output_tokens: 0,
        token_chunks: 0,
        usage_reported: false,
        cached_tokens: None,
        text: String::new(),
    }
}
