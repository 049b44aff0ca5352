//! The clients: per context, a worker that keeps acting on it through random replicas —
//! starting turns, queueing messages behind running ones, answering input requests,
//! cancelling — and a streamer that follows its events, reconnecting with `Last-Event-ID`
//! to a random replica at random points. Every request goes through [`History::call`];
//! every event a streamer delivers is kept in its [`StreamLog`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use looopy_stream::sse::SseDecoder;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::history::{Action, History, Seen, StreamLog};

/// The message text of operation `id`: its token, and `ask` when the turn must ask for
/// input (the soak's script asks then).
pub fn message_text(token: &str, ask: bool) -> String {
    if ask {
        format!("{token} please ask me")
    } else {
        format!("{token} count please")
    }
}

/// What the worker learnt of its context from `GET /v1/contexts/{id}`.
#[derive(Debug, Default)]
struct View {
    /// The paused task and its input id, when a question is open.
    waiting: Option<(String, String)>,
    /// Tasks that may still be cancelled: running, queued, paused.
    live: Vec<String>,
}

fn view_of(body: &Value) -> View {
    let waiting = body["waitingInput"]["taskId"].as_str().and_then(|task| {
        let input = body["waitingInput"]["pending"]["inputId"].as_str()?;
        Some((task.to_string(), input.to_string()))
    });
    let mut live: Vec<String> = body["running"]["taskId"]
        .as_str()
        .into_iter()
        .chain(
            body["queue"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|q| q["taskId"].as_str()),
        )
        .map(str::to_string)
        .collect();
    live.extend(waiting.iter().map(|(task, _)| task.clone()));
    View { waiting, live }
}

/// The running clients.
pub struct Clients {
    workers: Vec<JoinHandle<()>>,
    streamers: Vec<(watch::Sender<Option<u64>>, JoinHandle<StreamLog>)>,
}

impl Clients {
    /// A worker and a streamer per context, acting until `deadline` (streamers go on until
    /// [`Clients::finish`]).
    pub fn spawn(
        bases: &[String],
        contexts: &[String],
        history: &History,
        deadline: Instant,
        seed: u64,
    ) -> Clients {
        let bases: Arc<[String]> = bases.into();
        let mut workers = Vec::new();
        let mut streamers = Vec::new();
        for (n, context) in contexts.iter().enumerate() {
            let rng = StdRng::seed_from_u64(seed.wrapping_add(2 * n as u64 + 1));
            let worker = Worker {
                context: context.clone(),
                bases: Arc::clone(&bases),
                history: history.clone(),
                http: reqwest::Client::new(),
                rng,
            };
            workers.push(tokio::spawn(worker.run(deadline)));
            let (target, watch) = watch::channel(None);
            let rng = StdRng::seed_from_u64(seed.wrapping_add(2 * n as u64 + 2));
            let streamer = stream(
                format!("s{n}"),
                context.clone(),
                Arc::clone(&bases),
                watch,
                rng,
            );
            streamers.push((target, tokio::spawn(streamer)));
        }
        Clients { workers, streamers }
    }

    /// Waits for the workers (they stop at the deadline, each request bounded).
    pub async fn stop_acting(&mut self) {
        for worker in self.workers.drain(..) {
            worker.await.unwrap();
        }
    }

    /// Tells each streamer the last seq of its context (`targets`, in context order), and
    /// collects what they saw once they reached it (or gave up, bounded).
    pub async fn finish(self, targets: &[u64]) -> Vec<StreamLog> {
        let mut logs = Vec::new();
        for ((target, handle), last) in self.streamers.into_iter().zip(targets) {
            let _ = target.send(Some(*last));
            logs.push(handle.await.unwrap());
        }
        logs
    }
}

struct Worker {
    context: String,
    bases: Arc<[String]>,
    history: History,
    http: reqwest::Client,
    rng: StdRng,
}

impl Worker {
    fn replica(&mut self) -> usize {
        self.rng.random_range(0..self.bases.len())
    }

    async fn run(mut self, deadline: Instant) {
        while Instant::now() < deadline {
            let pause = Duration::from_millis(self.rng.random_range(100..1200));
            tokio::time::sleep(pause).await;
            let view = self.look().await;
            let roll = self.rng.random_range(0..100);
            match view.waiting {
                Some((task, input)) if roll < 60 => self.answer(task, input).await,
                _ if roll >= 85 && !view.live.is_empty() => {
                    let task = view.live[self.rng.random_range(0..view.live.len())].clone();
                    self.cancel(task).await;
                }
                _ => {
                    self.send().await;
                    // Sometimes a second message at once, through another replica: it
                    // queues behind the first.
                    if roll % 3 == 0 {
                        self.send().await;
                    }
                }
            }
        }
    }

    /// The context's state from a random replica (a default view when it cannot answer).
    async fn look(&mut self) -> View {
        let replica = self.replica();
        let url = format!("{}/v1/contexts/{}", self.bases[replica], self.context);
        let answer = self
            .http
            .get(url)
            .timeout(Duration::from_secs(3))
            .send()
            .await;
        match answer {
            Ok(response) if response.status() == 200 => match response.json::<Value>().await {
                Ok(body) => view_of(&body),
                Err(_) => View::default(),
            },
            _ => View::default(),
        }
    }

    async fn send(&mut self) {
        let id = self.history.next_id();
        let token = format!("op-m{id}.");
        let ask = self.rng.random_range(0..100) < 30;
        let replica = self.replica();
        let request = self
            .http
            .post(format!(
                "{}/v1/contexts/{}/messages",
                self.bases[replica], self.context
            ))
            .json(&json!({"message": message_text(&token, ask)}));
        let action = Action::Send {
            context: self.context.clone(),
            token,
        };
        self.history.call(id, replica, action, request).await;
    }

    async fn answer(&mut self, task: String, input: String) {
        let id = self.history.next_id();
        let token = format!("op-a{id}.");
        let replica = self.replica();
        let request = self
            .http
            .post(format!("{}/v1/tasks/{task}/input", self.bases[replica]))
            .json(&json!({"inputId": input, "value": token}));
        let action = Action::Answer {
            context: self.context.clone(),
            task,
            input,
            token,
        };
        self.history.call(id, replica, action, request).await;
    }

    async fn cancel(&mut self, task: String) {
        let id = self.history.next_id();
        let replica = self.replica();
        let request = self
            .http
            .post(format!("{}/v1/tasks/{task}/cancel", self.bases[replica]));
        let action = Action::Cancel {
            context: self.context.clone(),
            task,
        };
        self.history.call(id, replica, action, request).await;
    }
}

/// How long a streamer may take, once told its target, to reach it.
const CATCH_UP: Duration = Duration::from_secs(60);

/// Follows `context` until told its last seq and it got there: each connection to a
/// random replica lives a random 0.3–5 s (or until it fails), then the next resumes after
/// the last event delivered.
async fn stream(
    client: String,
    context: String,
    bases: Arc<[String]>,
    target: watch::Receiver<Option<u64>>,
    mut rng: StdRng,
) -> StreamLog {
    let http = reqwest::Client::new();
    let mut log = StreamLog {
        client,
        context,
        events: Vec::new(),
        connections: 0,
    };
    let mut give_up: Option<Instant> = None;
    loop {
        let last = log.events.last().map_or(0, |e| e.seq);
        if let Some(goal) = *target.borrow() {
            let bound = *give_up.get_or_insert_with(|| Instant::now() + CATCH_UP);
            if last >= goal || Instant::now() > bound {
                return log;
            }
        }
        let base = &bases[rng.random_range(0..bases.len())];
        let lifetime = Duration::from_millis(rng.random_range(300..5000));
        log.connections += 1;
        let url = format!("{base}/v1/contexts/{}/events", log.context);
        let request = http.get(url).header("last-event-id", last.to_string());
        let read = async {
            let Ok(response) = request.send().await else {
                return;
            };
            if response.status() != 200 {
                return;
            }
            let mut decoder = SseDecoder::new();
            let mut body = response.bytes_stream();
            while let Some(Ok(chunk)) = body.next().await {
                for event in decoder.push(&chunk) {
                    let Ok(seq) = event.id.parse() else { continue };
                    log.events.push(Seen {
                        seq,
                        kind: event.event,
                        data: event.data,
                    });
                }
            }
        };
        if tokio::time::timeout(lifetime, read).await.is_ok() {
            // Ended or refused before its time (a replica down): do not spin.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
