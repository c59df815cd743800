//! One bounded poll for every suite: a test waits for a condition to hold,
//! never for a fixed time, and fails naming what it waited for. The limit
//! is a deadline for "eventually", not a speed assertion.
//!
//! A probe answers in whichever shape is natural where it is written
//! ([`Settled`]): `bool` (the condition holds), `Option<T>` (the value once
//! it is there), or `Result<T, String>` (the value, or what was seen
//! instead — reported when the limit is reached).

use std::future::Future;
use std::time::{Duration, Instant};

/// How often a probe is polled.
const EVERY: Duration = Duration::from_millis(100);

/// What a probe answers: settled with a value, or not yet (with what it saw).
pub trait Settled {
    /// The value a settled probe yields.
    type Value;
    /// The value, or what the probe saw instead.
    fn settled(self) -> Result<Self::Value, String>;
}

impl Settled for bool {
    type Value = ();
    fn settled(self) -> Result<(), String> {
        self.then_some(()).ok_or_else(|| "false".to_owned())
    }
}

impl<T> Settled for Option<T> {
    type Value = T;
    fn settled(self) -> Result<T, String> {
        self.ok_or_else(|| "nothing yet".to_owned())
    }
}

impl<T> Settled for Result<T, String> {
    type Value = T;
    fn settled(self) -> Result<T, String> {
        self
    }
}

/// Polls `probe` every 100 ms until it settles and returns its value;
/// fails the test naming `what` and the last state seen after `limit`.
pub async fn eventually<F, Fut>(
    what: &str,
    limit: Duration,
    mut probe: F,
) -> <Fut::Output as Settled>::Value
where
    F: FnMut() -> Fut,
    Fut: Future,
    Fut::Output: Settled,
{
    let deadline = Instant::now() + limit;
    loop {
        match probe().await.settled() {
            Ok(value) => return value,
            Err(seen) if Instant::now() >= deadline => {
                panic!("timed out after {limit:?} waiting for {what}; last seen: {seen}")
            }
            Err(_) => tokio::time::sleep(EVERY).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_shape_settles_or_says_what_it_saw() {
        assert_eq!(true.settled(), Ok(()));
        assert_eq!(false.settled(), Err("false".to_owned()));
        assert_eq!(Some(3).settled(), Ok(3));
        assert_eq!(None::<u8>.settled(), Err("nothing yet".to_owned()));
        assert_eq!(
            Err::<u8, _>("phase Pending".to_owned()).settled(),
            Err("phase Pending".to_owned())
        );
    }

    #[tokio::test]
    async fn polls_until_the_probe_settles() {
        let mut calls = 0;
        let got = eventually("the third call", Duration::from_secs(5), || {
            calls += 1;
            let n = calls;
            async move { (n >= 3).then_some(n) }
        })
        .await;
        assert_eq!(got, 3);
    }

    #[tokio::test]
    #[should_panic(expected = "waiting for never; last seen: still 1")]
    async fn fails_with_what_it_last_saw() {
        eventually("never", Duration::from_millis(250), || async {
            Err::<(), _>("still 1".to_owned())
        })
        .await;
    }
}
