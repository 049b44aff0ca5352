//! The fault-injection soak's parts (in the spirit of Jepsen): the system under test
//! ([`system`]: replicas behind proxies), the [`nemesis`] breaking it, the [`clients`]
//! using it and recording a [`history`], and the checker judging the history against the
//! replicas' [`logs`] ([`checker`] for the logs themselves, [`ops_check`] for what each
//! answer promised). The test itself is `tests/soak.rs`; RELIABILITY.md describes it.

pub mod checker;
pub mod clients;
pub mod disk;
pub mod history;
pub mod logs;
pub mod nemesis;
pub mod ops_check;
pub mod system;

use std::time::Duration;

/// How long the soak runs: `LOOOPY_SOAK_SECS` (default 30, a quick run by hand).
pub fn duration() -> Duration {
    Duration::from_secs(env_number("LOOOPY_SOAK_SECS").unwrap_or(30))
}

/// How many contexts the clients use at once: `LOOOPY_SOAK_CONTEXTS` (default 4).
pub fn contexts() -> usize {
    env_number("LOOOPY_SOAK_CONTEXTS").map_or(4, |n| n.max(1) as usize)
}

/// The random seed: `LOOOPY_SOAK_SEED`, or the clock's. (Timing makes no run repeat
/// exactly; the seed repeats the schedule of choices.)
pub fn seed() -> u64 {
    env_number("LOOOPY_SOAK_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    })
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.trim().parse().ok()
}

/// The lease time of the replicas: short, so faults outlive it.
pub const LEASE: Duration = Duration::from_secs(2);

/// About a second of deltas per answer.
fn ticks() -> String {
    "tick ".repeat(25)
}

/// The scripted model: a message with `ask` asks the user (`ask_user`) after a few deltas,
/// then answers slowly with the answer in it; any other message is answered slowly with
/// the message in the answer.
pub fn script() -> String {
    format!(
        r#"- when: {{user_contains: [ask]}}
  responses:
    - steps:
        - text: "Let me ask you first. "
          chunk_size: 5
          delay_ms: 40
        - tool_call: {{name: ask_user, arguments: {{question: "Which one?"}}}}
    - steps:
        - text: "Thanks for {{{{last_tool_result}}}}: {ticks}"
          chunk_size: 5
          delay_ms: 40
- responses:
    - steps:
        - text: "{{{{user}}}}: {ticks}"
          chunk_size: 5
          delay_ms: 40
"#,
        ticks = ticks()
    )
}
