//! Watch streams: newline-delimited JSON events over a chunked response.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc, watch};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;

use super::error::ApiError;
use super::meta::meta_str;
use super::resources::ResourceType;
use super::selector::Filter;
use super::store::{Change, ChangeType, WatchStart, watch_line};
use super::table;

/// How often a watch that allows bookmarks gets one.
const BOOKMARK_INTERVAL: Duration = Duration::from_secs(60);
/// Lines buffered between the watch task and the connection.
const LINE_BUFFER: usize = 64;

/// The parameters of one watch.
pub(crate) struct WatchParams {
    pub rt: &'static ResourceType,
    pub filter: Filter,
    /// Changes with a resourceVersion at or below this are not sent (a watch from a future
    /// resourceVersion waits for it).
    pub after: u64,
    pub bookmarks: bool,
    /// Send the `k8s.io/initial-events-end` bookmark after the initial events.
    pub initial_events_end: bool,
    pub timeout: Duration,
    /// Render objects as one-row Tables (kubectl get -w); holds `includeObject`.
    pub table: Option<Option<String>>,
}

impl WatchParams {
    /// The line for `object` as `kind`, as a Table when asked for one.
    fn render(&self, kind: &str, object: &Arc<Value>) -> Bytes {
        match &self.table {
            None => watch_line(kind, object),
            Some(include) => {
                let rv = meta_str(object, "resourceVersion")
                    .and_then(|r| r.parse().ok())
                    .unwrap_or(0);
                let t = table::table(
                    self.rt,
                    std::slice::from_ref(object),
                    rv,
                    None,
                    include.as_deref(),
                );
                watch_line(kind, &t)
            }
        }
    }

    /// The line for a change, shared between watchers unless it is a Table.
    fn change_line(&self, change: &Change, kind: ChangeType) -> Bytes {
        match self.table {
            None => change.line(kind),
            Some(_) => self.render(kind.as_str(), &change.object),
        }
    }
}

/// The response body of a watch; its task ends when the client goes away, the timeout passes,
/// watches are dropped, or the watch falls too far behind.
pub(crate) fn body(start: WatchStart, params: WatchParams, epoch: watch::Receiver<u64>) -> Body {
    let (tx, rx) = mpsc::channel::<Bytes>(LINE_BUFFER);
    tokio::spawn(run(tx, start, params, epoch));
    Body::from_stream(ReceiverStream::new(rx).map(Ok::<Bytes, Infallible>))
}

/// A body that is just one expired-watch ERROR event.
pub(crate) fn expired_body(requested: u64, oldest: u64) -> Body {
    Body::from(expired_line(requested, oldest))
}

fn expired_line(requested: u64, oldest: u64) -> Bytes {
    let status = ApiError::new(
        410,
        format!("too old resource version: {requested} ({oldest})"),
    )
    .status();
    watch_line("ERROR", &status)
}

fn bookmark(rt: &ResourceType, rv: u64, initial_end: bool) -> Bytes {
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let object = json!({"apiVersion": rt.api_version(), "kind": rt.kind, "metadata": metadata});
    watch_line("BOOKMARK", &object)
}

/// The event type a watcher with `filter` sees for `change`, if any: objects entering the
/// selection are ADDED, objects leaving it are DELETED.
fn transition(change: &Change, filter: &Filter) -> Option<ChangeType> {
    let now = filter.matches(&change.object);
    let kind = match change.kind {
        ChangeType::Added | ChangeType::Deleted => now.then_some(change.kind)?,
        ChangeType::Modified => {
            let before = change
                .previous
                .as_deref()
                .is_some_and(|p| filter.matches(p));
            match (before, now) {
                (true, true) => ChangeType::Modified,
                (false, true) => ChangeType::Added,
                (true, false) => ChangeType::Deleted,
                (false, false) => return None,
            }
        }
    };
    Some(kind)
}

async fn run(
    tx: mpsc::Sender<Bytes>,
    start: WatchStart,
    p: WatchParams,
    mut epoch: watch::Receiver<u64>,
) {
    if let Some((requested, oldest)) = start.expired {
        let _ = tx.send(expired_line(requested, oldest)).await;
        return;
    }
    let mut last = start.resource_version.max(p.after);
    for obj in &start.initial {
        if tx.send(p.render("ADDED", obj)).await.is_err() {
            return;
        }
    }
    for change in &start.replay {
        if change.rv > p.after
            && let Some(kind) = transition(change, &p.filter)
            && tx.send(p.change_line(change, kind)).await.is_err()
        {
            return;
        }
    }
    if p.initial_events_end
        && tx
            .send(bookmark(p.rt, start.resource_version, true))
            .await
            .is_err()
    {
        return;
    }
    let mut receiver = start.receiver;
    let deadline = tokio::time::sleep(p.timeout);
    tokio::pin!(deadline);
    let mut ticker = tokio::time::interval_at(
        tokio::time::Instant::now() + BOOKMARK_INTERVAL,
        BOOKMARK_INTERVAL,
    );
    loop {
        tokio::select! {
            biased;
            _ = tx.closed() => return,
            _ = epoch.changed() => return,
            _ = &mut deadline => return,
            received = receiver.recv() => match received {
                Ok(change) => {
                    if change.rv <= p.after {
                        continue;
                    }
                    last = last.max(change.rv);
                    if change.resource != p.rt.index {
                        continue;
                    }
                    if let Some(kind) = transition(&change, &p.filter)
                        && tx.send(p.change_line(&change, kind)).await.is_err()
                    {
                        return;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    // Events were lost for this watcher: tell the client to re-list rather
                    // than let it miss changes silently.
                    let _ = tx.send(expired_line(last, last + 1)).await;
                    return;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = ticker.tick(), if p.bookmarks => {
                // `last` covers every change this watcher has received, so resuming from it
                // loses nothing.
                if tx.send(bookmark(p.rt, last, false)).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// A watch's resourceVersion parameter: `None` for unset or "0".
pub(crate) fn parse_resource_version(v: Option<&str>) -> Result<Option<u64>, ApiError> {
    match v {
        None | Some("") | Some("0") => Ok(None),
        Some(s) => s
            .parse()
            .map(Some)
            .map_err(|_| ApiError::bad_request(format!("invalid resource version: {s:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::selector::LabelSelector;

    fn decode(line: &Bytes) -> Value {
        serde_json::from_slice(line).unwrap_or_default()
    }

    #[test]
    fn expired_line_is_a_410_status() {
        let line = expired_line(5, 9);
        let v = decode(&line);
        assert_eq!(v["type"], "ERROR");
        assert_eq!(v["object"]["code"], 410);
        assert_eq!(v["object"]["reason"], "Expired");
        assert_eq!(v["object"]["message"], "too old resource version: 5 (9)");
        assert!(line.ends_with(b"\n"));
    }

    #[test]
    fn selector_transitions() {
        let filter = Filter {
            labels: LabelSelector::parse("a=1").unwrap_or_default(),
            ..Filter::default()
        };
        let matching = Arc::new(json!({"metadata": {"labels": {"a": "1"}}}));
        let other = Arc::new(json!({"metadata": {"labels": {"a": "2"}}}));
        let kind_of = |c: Change| transition(&c, &filter).map(|k| json!(k.as_str()));
        let modified = |prev: &Arc<Value>, now: &Arc<Value>| {
            Change::new(2, 1, ChangeType::Modified, now.clone(), Some(prev.clone()))
        };
        assert_eq!(kind_of(modified(&other, &matching)), Some(json!("ADDED")));
        assert_eq!(kind_of(modified(&matching, &other)), Some(json!("DELETED")));
        assert_eq!(
            kind_of(modified(&matching, &matching)),
            Some(json!("MODIFIED"))
        );
        assert_eq!(kind_of(modified(&other, &other)), None);
        assert_eq!(
            kind_of(Change::new(3, 1, ChangeType::Deleted, other.clone(), None)),
            None
        );
    }

    #[test]
    fn resource_version_parameter() {
        assert!(parse_resource_version(Some("x")).is_err());
        assert_eq!(parse_resource_version(Some("0")), Ok(None));
        assert_eq!(parse_resource_version(None), Ok(None));
        assert_eq!(parse_resource_version(Some("7")), Ok(Some(7)));
    }
}
