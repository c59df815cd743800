//! The HTTP bridge's limits: what one request, one connection and the whole
//! listener may cost. Every limit has a flag and an environment variable;
//! the defaults suit handoff bodies (at most 32 KiB) and tool calls bounded
//! by the server's call timeout.

use std::time::Duration;

use clap::Args;

use handoff_core::fairness::Shares;
use handoff_core::time::positive_duration;

/// Default `--max-body-bytes`: 1 MiB.
pub(crate) const DEFAULT_MAX_BODY_BYTES: usize = 1 << 20;
/// Default `--max-header-bytes`: 32 KiB (long OIDC tokens fit).
pub(crate) const DEFAULT_MAX_HEADER_BYTES: usize = 32 << 10;
/// Default `--max-in-flight`.
pub(crate) const DEFAULT_MAX_IN_FLIGHT: usize = 128;
/// Default `--max-queued-per-caller`.
pub(crate) const DEFAULT_MAX_QUEUED_PER_CALLER: usize = 64;
/// Default `--max-queued`.
pub(crate) const DEFAULT_MAX_QUEUED: usize = 512;
/// Default `--queue-wait`.
pub(crate) const DEFAULT_QUEUE_WAIT: Duration = Duration::from_secs(1);
/// Default `--max-connections`.
pub(crate) const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// Default `--request-timeout`: longer than a tool call may take.
pub(crate) const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Default `--header-read-timeout`.
pub(crate) const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Default `--idle-timeout`.
pub(crate) const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Limits of `handoff mcp --listen`.
#[derive(Clone, Debug, Args)]
pub struct Limits {
    /// Largest request body accepted; larger ones get 413 (a declared
    /// Content-Length at once, a streamed body as soon as it passes the
    /// limit, never buffered whole).
    #[arg(long, env = "HANDOFF_MAX_BODY_BYTES", default_value_t = DEFAULT_MAX_BODY_BYTES, value_name = "BYTES")]
    pub max_body_bytes: usize,
    /// Largest request line and headers together; larger get 431.
    #[arg(long, env = "HANDOFF_MAX_HEADER_BYTES", default_value_t = DEFAULT_MAX_HEADER_BYTES, value_name = "BYTES")]
    pub max_header_bytes: usize,
    /// Most requests of authenticated callers served at once, whoever the
    /// callers are (see --max-in-flight-per-caller for each one's share).
    #[arg(long, env = "HANDOFF_MAX_IN_FLIGHT", default_value_t = DEFAULT_MAX_IN_FLIGHT, value_parser = at_least_one)]
    pub max_in_flight: usize,
    /// Most requests of one caller (the user its bearer token resolved to)
    /// served at once: its fair share. Further ones wait in its queue;
    /// a caller whose share and queue are full gets 429 with
    /// `Retry-After`. Default: a sixteenth of --max-in-flight (at least 1).
    /// A share is of slots, not of CPU: on a replica with few cores a
    /// smaller share keeps one flooding caller from slowing the others.
    #[arg(long, env = "HANDOFF_MAX_IN_FLIGHT_PER_CALLER", value_parser = at_least_one, value_name = "N")]
    pub max_in_flight_per_caller: Option<usize>,
    /// Most requests of one caller waiting for a slot of its share.
    #[arg(long, env = "HANDOFF_MAX_QUEUED_PER_CALLER", default_value_t = DEFAULT_MAX_QUEUED_PER_CALLER, value_name = "N")]
    pub max_queued_per_caller: usize,
    /// Most requests waiting for a slot, all callers together; past it a
    /// request is refused at once (503 within its share, 429 past it).
    #[arg(long, env = "HANDOFF_MAX_QUEUED", default_value_t = DEFAULT_MAX_QUEUED, value_name = "N")]
    pub max_queued: usize,
    /// Longest a request waits in its caller's queue; then 429 (over its
    /// share) or 503 (the bridge is full) with `Retry-After`. Shorter than
    /// --request-timeout.
    #[arg(long, env = "HANDOFF_QUEUE_WAIT", default_value = "1s", value_parser = positive_duration, value_name = "DURATION")]
    pub queue_wait: Duration,
    /// Most connections open at once; further ones wait in the listen
    /// backlog until one closes.
    #[arg(long, env = "HANDOFF_MAX_CONNECTIONS", default_value_t = DEFAULT_MAX_CONNECTIONS, value_parser = at_least_one)]
    pub max_connections: usize,
    /// Longest a request may take, body and answer included; then 503 with
    /// `Retry-After`.
    #[arg(long, env = "HANDOFF_REQUEST_TIMEOUT", default_value = "30s", value_parser = positive_duration, value_name = "DURATION")]
    pub request_timeout: Duration,
    /// Longest a client may take to send a request's headers (slowloris),
    /// to finish a TLS handshake, or to start its next request on a
    /// kept-alive connection; then the connection is closed.
    #[arg(long, env = "HANDOFF_HEADER_READ_TIMEOUT", default_value = "10s", value_parser = positive_duration, value_name = "DURATION")]
    pub header_read_timeout: Duration,
    /// Longest a connection may wait for a read or a write to make
    /// progress (a client that stops reading its answer, a stalled body);
    /// then it is closed. At least --request-timeout.
    #[arg(long, env = "HANDOFF_IDLE_TIMEOUT", default_value = "60s", value_parser = positive_duration, value_name = "DURATION")]
    pub idle_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_header_bytes: DEFAULT_MAX_HEADER_BYTES,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            max_in_flight_per_caller: None,
            max_queued_per_caller: DEFAULT_MAX_QUEUED_PER_CALLER,
            max_queued: DEFAULT_MAX_QUEUED,
            queue_wait: DEFAULT_QUEUE_WAIT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
        }
    }
}

impl Limits {
    /// Refuses combinations that would cut healthy requests short.
    pub fn validate(&self) -> Result<(), String> {
        if self.idle_timeout < self.request_timeout {
            return Err(format!(
                "--idle-timeout ({:?}) must be at least --request-timeout ({:?}): a connection waits without reads or writes while its request is served",
                self.idle_timeout, self.request_timeout
            ));
        }
        let shares = self.shares();
        if shares.per_caller > shares.max_in_flight {
            return Err(format!(
                "--max-in-flight-per-caller ({}) must be at most --max-in-flight ({}): a caller's share is part of the bridge's",
                shares.per_caller, shares.max_in_flight
            ));
        }
        if self.max_queued_per_caller > self.max_queued {
            return Err(format!(
                "--max-queued-per-caller ({}) must be at most --max-queued ({}): a caller's queue is part of the bridge's",
                self.max_queued_per_caller, self.max_queued
            ));
        }
        if self.queue_wait >= self.request_timeout {
            return Err(format!(
                "--queue-wait ({:?}) must be shorter than --request-timeout ({:?}): a request waits for its slot within its time",
                self.queue_wait, self.request_timeout
            ));
        }
        Ok(())
    }

    /// The fair share these limits set; the per-caller share defaults to a
    /// sixteenth of the whole (at least 1).
    pub fn shares(&self) -> Shares {
        Shares {
            max_in_flight: self.max_in_flight,
            per_caller: self
                .max_in_flight_per_caller
                .unwrap_or((self.max_in_flight / 16).max(1)),
            queued_per_caller: self.max_queued_per_caller,
            max_queued: self.max_queued,
        }
    }
}

/// A whole number of at least 1.
pub fn at_least_one(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) | Err(_) => Err(format!("{text:?}: a whole number of at least 1 expected")),
        Ok(n) => Ok(n),
    }
}

#[cfg(test)]
mod tests {
    use clap::{FromArgMatches, Parser};

    use super::*;

    #[derive(Parser)]
    struct Command {
        #[command(flatten)]
        limits: Limits,
    }

    fn parse(args: &[&str]) -> Result<Limits, clap::Error> {
        let matches = <Command as clap::CommandFactory>::command()
            .try_get_matches_from(std::iter::once("mcp").chain(args.iter().copied()))?;
        Command::from_arg_matches(&matches).map(|c| c.limits)
    }

    #[test]
    fn the_defaults_are_the_flags_defaults() {
        let parsed = parse(&[]).expect("no flags");
        let default = Limits::default();
        assert_eq!(format!("{parsed:?}"), format!("{default:?}"));
        assert_eq!(default.validate(), Ok(()));
    }

    #[test]
    fn flags_parse_and_bad_values_are_refused() {
        let limits = parse(&[
            "--max-body-bytes=2048",
            "--request-timeout=1500ms",
            "--header-read-timeout=2s",
            "--idle-timeout=2s",
            "--max-in-flight=2",
        ])
        .expect("valid flags");
        assert_eq!(limits.max_body_bytes, 2048);
        assert_eq!(limits.request_timeout, Duration::from_millis(1500));
        assert_eq!(limits.header_read_timeout, Duration::from_secs(2));
        assert_eq!(limits.max_in_flight, 2);
        assert_eq!(limits.validate(), Ok(()));
        for bad in [
            "--max-in-flight=0",
            "--max-connections=x",
            "--request-timeout=0s",
            "--header-read-timeout=soon",
        ] {
            assert!(parse(&[bad]).is_err(), "{bad} was accepted");
        }
        let short_idle = parse(&["--idle-timeout=1s"]).expect("parses");
        assert!(
            short_idle.validate().is_err(),
            "idle shorter than a request"
        );
        assert!(parse(&["--max-in-flight-per-caller=0"]).is_err());
    }

    #[test]
    fn fair_share_flags_are_checked_against_each_other() {
        // (flags, the flag the error names; None: valid)
        let cases: [(&[&str], Option<&str>); 6] = [
            (&[], None),
            (&["--max-in-flight=2"], None),
            (
                &["--max-in-flight=8", "--max-in-flight-per-caller=9"],
                Some("--max-in-flight-per-caller (9)"),
            ),
            (
                &["--max-queued=4", "--max-queued-per-caller=5"],
                Some("--max-queued-per-caller (5)"),
            ),
            (&["--queue-wait=30s"], Some("--queue-wait (30s)")),
            (
                &[
                    "--max-in-flight=8",
                    "--max-in-flight-per-caller=8",
                    "--queue-wait=29s",
                ],
                None,
            ),
        ];
        for (flags, error) in cases {
            let got = parse(flags).expect("parses").validate();
            match error {
                None => assert_eq!(got, Ok(()), "{flags:?}"),
                Some(named) => assert!(
                    got.as_ref().is_err_and(|e| e.starts_with(named)),
                    "{flags:?}: {got:?}"
                ),
            }
        }
        for (max, per) in [(128, 8), (2, 1), (1, 1), (17, 1), (32, 2), (1024, 64)] {
            let limits = Limits {
                max_in_flight: max,
                ..Limits::default()
            };
            assert_eq!(limits.shares().per_caller, per, "--max-in-flight={max}");
        }
    }
}
