//! The renewer against a scripted token source, on tokio's paused clock.

use std::collections::VecDeque;
use std::sync::Mutex;

use super::*;

/// Answers fetches from a script and records when each came.
struct Script {
    answers: Mutex<VecDeque<Result<Issued, String>>>,
    fetched_at: Mutex<Vec<Instant>>,
}

impl Script {
    fn new(answers: Vec<Result<Issued, String>>) -> Arc<Script> {
        Arc::new(Script {
            answers: Mutex::new(answers.into()),
            fetched_at: Mutex::new(Vec::new()),
        })
    }

    fn fetches(&self) -> Vec<Duration> {
        let times = self.fetched_at.lock().unwrap_or_else(|p| p.into_inner());
        times.windows(2).map(|w| w[1] - w[0]).collect()
    }

    fn count(&self) -> usize {
        self.fetched_at
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }
}

impl TokenSource for Script {
    fn fetch(&self) -> Pin<Box<dyn Future<Output = Result<Issued, String>> + Send + '_>> {
        self.fetched_at
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Instant::now());
        let next = self
            .answers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop_front()
            .unwrap_or_else(|| Err("script exhausted".into()));
        Box::pin(async move { next })
    }
}

fn ok(token: &str, secs: u64) -> Result<Issued, String> {
    Ok(Issued {
        token: token.into(),
        lifetime: Duration::from_secs(secs),
    })
}

/// Lets the renewer run until it waits again.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[test]
fn renewal_leaves_a_fifth_of_the_lifetime_and_pins_short_lifetimes() {
    assert_eq!(
        renew_after(Duration::from_secs(3600)),
        Duration::from_secs(2880)
    );
    // Shorter than ten minutes (clock skew): taken as ten minutes.
    assert_eq!(
        renew_after(Duration::from_secs(60)),
        Duration::from_secs(480)
    );
    assert_eq!(
        renew_after(Duration::from_secs(600)),
        Duration::from_secs(480)
    );
}

#[tokio::test(start_paused = true)]
async fn renews_at_eighty_percent_and_keeps_the_old_token_while_renewal_fails() {
    let script = Script::new(vec![
        Err("apiserver down".into()),
        Err("apiserver down".into()),
        ok("second", 3600),
    ]);
    let current = Arc::new(Current::default());
    current.set("first".into());
    let metrics = Arc::new(Metrics::default());
    let cancel = CancellationToken::new();
    let start = Instant::now();
    // Record the start as the first fetch, so the gaps read from it.
    script
        .fetched_at
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(start);
    tokio::spawn(renew(
        "node-controller",
        Arc::clone(&script) as Arc<dyn TokenSource>,
        Arc::clone(&current),
        Duration::from_secs(3600),
        Failures::new("node-controller", None).with_metrics(Arc::clone(&metrics)),
        cancel.clone(),
    ));
    // Not before 80% of the lifetime.
    tokio::time::sleep(Duration::from_secs(2879)).await;
    settle().await;
    assert_eq!(script.count(), 1, "renewed early");
    tokio::time::sleep(Duration::from_secs(1)).await;
    settle().await;
    assert_eq!(script.count(), 2, "renewal due at 2880 s");
    // The failed renewal leaves the old token in use, and is counted for an alert.
    assert_eq!(current.get(), "first");
    let failures = || metrics.total("wasm_ccm_service_account_token_failures_total");
    assert_eq!(failures(), 1.0);
    tokio::time::sleep(Duration::from_millis(500)).await;
    settle().await;
    assert_eq!(script.count(), 3, "retried after 500 ms");
    assert_eq!(current.get(), "first");
    tokio::time::sleep(Duration::from_secs(1)).await;
    settle().await;
    assert_eq!(script.count(), 4, "retried after 1 s more");
    assert_eq!(current.get(), "second");
    assert_eq!(failures(), 2.0, "the two failed attempts, not the good one");
    assert_eq!(
        script.fetches(),
        [
            Duration::from_secs(2880),
            Duration::from_millis(500),
            Duration::from_secs(1)
        ]
    );
    // The new token's own schedule: the next renewal 2880 s after it was issued.
    tokio::time::sleep(Duration::from_secs(2879)).await;
    settle().await;
    assert_eq!(script.count(), 4);
    cancel.cancel();
}

#[tokio::test(start_paused = true)]
async fn a_refused_request_renews_at_once() {
    let script = Script::new(vec![ok("second", 3600)]);
    let current = Arc::new(Current::default());
    current.set("first".into());
    let cancel = CancellationToken::new();
    tokio::spawn(renew(
        "route-controller",
        Arc::clone(&script) as Arc<dyn TokenSource>,
        Arc::clone(&current),
        Duration::from_secs(3600),
        Failures::new("route-controller", None),
        cancel.clone(),
    ));
    settle().await;
    assert_eq!(script.count(), 0);
    current.renew_now.notify_one();
    settle().await;
    assert_eq!(script.count(), 1);
    assert_eq!(current.get(), "second");
    cancel.cancel();
}

#[tokio::test(start_paused = true)]
async fn the_first_token_is_tried_four_times_then_the_error_names_the_account() {
    let script = Script::new(vec![
        Err("forbidden".into()),
        Err("forbidden".into()),
        Err("forbidden".into()),
        Err("serviceaccounts/token is forbidden".into()),
    ]);
    let e = first_token(&*script, "service-controller")
        .await
        .expect_err("no token");
    assert_eq!(script.count(), 4);
    assert!(
        e.contains("kube-system/service-controller")
            && e.contains("serviceaccounts/token is forbidden"),
        "{e}"
    );
    let script = Script::new(vec![Err("not yet".into()), ok("t", 3600)]);
    assert_eq!(
        first_token(&*script, "service-controller").await,
        ok("t", 3600)
    );
}

#[test]
fn the_anonymous_configuration_keeps_the_server_and_drops_credentials() {
    let mut config = Config::new("https://10.0.0.1:6443".parse().expect("url"));
    config.auth_info.token = Some("root-token".to_string().into());
    config.root_cert = Some(vec![vec![1, 2, 3]]);
    let anon = anonymous(&config);
    assert_eq!(anon.cluster_url, config.cluster_url);
    assert_eq!(anon.root_cert, config.root_cert);
    assert!(anon.auth_info.token.is_none());
    assert_eq!(
        username("node-controller"),
        "system:serviceaccount:kube-system:node-controller"
    );
}
