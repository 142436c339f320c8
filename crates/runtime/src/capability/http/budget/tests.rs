//! The budget's rules under tokio's paused clock: pacing, refusal at the deadline, the cloud's
//! pause and the bounds on `Retry-After`. (Shared by instances, against a simulator:
//! `tests/cloud_budget.rs`.)

use std::sync::Arc;

use super::*;

/// A deadline `secs` from now, on the clock the call's deadline uses.
fn deadline_in(secs: f64) -> std::time::Instant {
    std::time::Instant::now() + Duration::from_secs_f64(secs)
}

fn answer(status: u16, retry_after: Option<&str>) -> Response {
    Response {
        status,
        headers: retry_after
            .map(|v| vec![("Retry-After".to_string(), v.to_string())])
            .unwrap_or_default(),
        body: Vec::new(),
    }
}

/// How long one admission with `deadline_secs` waits, or its error.
async fn admit_after(budget: &RequestBudget, deadline_secs: f64) -> Result<Duration, HttpError> {
    let start = Instant::now();
    budget.admit(deadline_in(deadline_secs)).await?;
    Ok(start.elapsed())
}

#[tokio::test(start_paused = true)]
async fn requests_from_many_tasks_share_one_rate() {
    // 10/s with a burst of 2: 12 requests from four tasks take (12 - 2) / 10 = 1 s, however
    // they are spread.
    let budget = Arc::new(RequestBudget::new(10.0, 2));
    let start = Instant::now();
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let budget = budget.clone();
            tokio::spawn(async move {
                for _ in 0..3 {
                    budget.admit(deadline_in(60.0)).await.expect("admitted");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("task");
    }
    assert_eq!(start.elapsed(), Duration::from_secs(1));
    let counts = budget.counts();
    assert_eq!(counts.get(Outcome::Sent), 2, "{counts:?}");
    assert_eq!(counts.get(Outcome::Waited), 10, "{counts:?}");
    assert!(counts.wait_seconds > 0.0, "{counts:?}");
}

#[tokio::test(start_paused = true)]
async fn a_request_without_a_token_before_the_deadline_is_refused_at_once() {
    let budget = RequestBudget::new(1.0, 1);
    assert_eq!(admit_after(&budget, 1.0).await, Ok(Duration::ZERO));
    // The next token comes in 1 s; a 1 s call leaves a request until 0.5 s (the margin of
    // `request_budget`): refused now, without waiting.
    let start = Instant::now();
    let refused = budget.admit(deadline_in(1.0)).await;
    assert_eq!(start.elapsed(), Duration::ZERO, "refused at once");
    let Err(HttpError::Timeout(message)) = refused else {
        panic!("expected a timeout, got {refused:?}");
    };
    assert!(
        message.contains("not sent")
            && message.contains("1 requests/s, burst 1")
            && message.contains("--cloud-request-rate")
            && message.contains("--call-timeout"),
        "{message}"
    );
    assert_eq!(budget.counts().get(Outcome::RefusedByBudget), 1);
    // The refusal took no token: a call with time enough waits the one second.
    assert_eq!(admit_after(&budget, 30.0).await, Ok(Duration::from_secs(1)));
}

#[tokio::test(start_paused = true)]
async fn a_429_pauses_every_request_of_the_driver_until_retry_after() {
    let budget = Arc::new(RequestBudget::new(0.0, 1));
    budget.observe(&answer(429, Some("5")));
    assert_eq!(budget.counts().get(Outcome::RateLimitedByCloud), 1);
    let waiting: Vec<_> = (0..3)
        .map(|_| {
            let budget = budget.clone();
            tokio::spawn(async move { admit_after(&budget, 60.0).await })
        })
        .collect();
    for task in waiting {
        assert_eq!(task.await.expect("task"), Ok(Duration::from_secs(5)));
    }
    assert_eq!(budget.counts().get(Outcome::Waited), 3);
    assert_eq!(admit_after(&budget, 60.0).await, Ok(Duration::ZERO), "over");
}

#[tokio::test(start_paused = true)]
async fn a_pause_longer_than_the_call_refuses_at_once() {
    let budget = RequestBudget::new(0.0, 1);
    budget.observe(&answer(429, Some("20")));
    let start = Instant::now();
    let refused = budget.admit(deadline_in(10.0)).await;
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert!(
        matches!(&refused, Err(HttpError::Timeout(m)) if m.contains("429") && m.contains("--call-timeout")),
        "{refused:?}"
    );
    assert_eq!(budget.counts().get(Outcome::RefusedWhilePaused), 1);
}

#[tokio::test(start_paused = true)]
async fn a_request_holding_a_token_still_waits_for_a_pause_that_began_meanwhile() {
    let budget = Arc::new(RequestBudget::new(1.0, 1));
    budget.admit(deadline_in(60.0)).await.expect("the burst");
    // The next token is due in 1 s; at 0.5 s the cloud asks for 3 s.
    let next = tokio::spawn({
        let budget = budget.clone();
        async move { admit_after(&budget, 60.0).await }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    budget.observe(&answer(429, Some("3")));
    assert_eq!(
        next.await.expect("task"),
        Ok(Duration::from_millis(3500)),
        "until the pause ends, not when the token was due"
    );
}

#[tokio::test(start_paused = true)]
async fn the_clouds_retry_after_is_bounded() {
    for (status, value, pause) in [
        // Huge delta-seconds, beyond u64 too: capped.
        (429, Some("999999999999999999999999"), MAX_PAUSE),
        (429, Some("86400"), MAX_PAUSE),
        // A date far away: capped.
        (429, Some("Fri, 31 Dec 2100 23:59:59 GMT"), MAX_PAUSE),
        // Malformed or absent on a 429: the default pause.
        (429, Some("soon"), DEFAULT_PAUSE),
        (429, Some("-5"), DEFAULT_PAUSE),
        (429, Some("1.5"), DEFAULT_PAUSE),
        (429, None, DEFAULT_PAUSE),
        // A date in the past: no wait.
        (429, Some("Sun, 06 Nov 1994 08:49:37 GMT"), Duration::ZERO),
        // A 503 pauses only with a readable Retry-After.
        (503, Some("2"), Duration::from_secs(2)),
        (503, None, Duration::ZERO),
        (503, Some("later"), Duration::ZERO),
        // Another status never pauses.
        (500, Some("30"), Duration::ZERO),
        (200, Some("30"), Duration::ZERO),
    ] {
        let budget = RequestBudget::new(0.0, 1);
        budget.observe(&answer(status, value));
        assert_eq!(
            admit_after(&budget, 600.0).await,
            Ok(pause),
            "{status} Retry-After {value:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_shorter_answer_never_ends_a_longer_pause() {
    let budget = RequestBudget::new(0.0, 1);
    budget.observe(&answer(429, Some("10")));
    budget.observe(&answer(429, Some("1")));
    assert_eq!(
        admit_after(&budget, 60.0).await,
        Ok(Duration::from_secs(10))
    );
}

#[test]
fn retry_after_reads_every_form_rfc_9110_names() {
    let now = jiff::Timestamp::from_second(784_111_777).expect("1994-11-06T08:49:37Z");
    let at = |text| parse_retry_after(text, now);
    assert_eq!(at("120"), Some(Duration::from_secs(120)));
    assert_eq!(at(" 7 "), Some(Duration::from_secs(7)));
    assert_eq!(at("0"), Some(Duration::ZERO));
    assert_eq!(at("99999999999999999999999"), Some(Duration::MAX));
    // The three date forms of §5.6.7, each ten seconds after `now`.
    let ten = Some(Duration::from_secs(10));
    assert_eq!(at("Sun, 06 Nov 1994 08:49:47 GMT"), ten);
    assert_eq!(at("Sunday, 06-Nov-94 08:49:47 GMT"), ten);
    assert_eq!(at("Sun Nov  6 08:49:47 1994"), ten);
    // Before `now`: no wait.
    assert_eq!(at("Sun, 06 Nov 1994 08:49:27 GMT"), Some(Duration::ZERO));
    for bad in [
        "",
        "-1",
        "1.5",
        "1e3",
        "soon",
        "Sun, 06 Nov 1994",
        "06 Nov 1994 08:49:47",
    ] {
        assert_eq!(at(bad), None, "{bad:?}");
    }
}
