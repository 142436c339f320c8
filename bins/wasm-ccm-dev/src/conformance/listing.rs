//! Contract 0.2.2's `instance-listing`: the listing must say what the per-node functions say,
//! because the host answers node initialisation, the address refresh and the lifecycle pass from
//! it. Read with the host's own page rules and index (`wasm_ccm_controllers::PageRules`,
//! `ListingIndex`), so a listing passes here exactly when the host would use it.

use wasm_ccm_controllers::{ListingIndex, PageRules};
use wasm_ccm_runtime::types::{ListedInstance, ProviderError};
use wasm_ccm_runtime::{CallError, Driver};

use super::harness::{Harness, scope};
use super::report::Checks;
use super::scenario::Scenario;

const LISTING: &str = "instances/listing";
const AGREES: &str = "instances/listing-agrees";
const UNKNOWN: &str = "instances/listing-unknown";

/// Every page of the warm driver's listing under the host's bounds, with the number of pages;
/// `None` when the driver does not list.
async fn list_all(
    h: &mut Harness,
    scheme: &str,
) -> Result<Option<(Vec<ListedInstance>, usize)>, String> {
    let mut rules = PageRules::new(scheme);
    let mut page: Option<String> = None;
    let mut pages = 0;
    loop {
        let outcome = h
            .warm
            .list_instances(page.as_deref(), &scope("instance-listing"))
            .await;
        h.observe("instance-listing.list-instances", &outcome);
        pages += 1;
        let got = match outcome.result {
            Ok(got) => got,
            Err(CallError::Provider(ProviderError::NotImplemented)) if pages == 1 => {
                return Ok(None);
            }
            Err(e) => return Err(format!("page {pages} failed: {e}")),
        };
        match rules.take(got.instances, got.next) {
            Ok(Some(next)) => page = Some(next),
            Ok(None) => return Ok(Some((rules.into_instances(), pages))),
            Err(why) => return Err(format!("the host would refuse this listing: {why}")),
        }
    }
}

/// The listing against every node of the scenario: a node that exists is listed with the
/// per-node answers; a node the cloud does not have is not listed (the host would take it for
/// existing and never delete it).
pub(super) async fn check(h: &mut Harness, scenario: &Scenario, checks: &mut Checks) {
    let scheme = h.warm.info().provider_id_scheme.clone();
    let (instances, pages) = match list_all(h, &scheme).await {
        Ok(Some(listed)) => listed,
        Ok(None) => {
            checks.skip(
                LISTING,
                None,
                "the driver does not list its instances (instance-listing answers not-implemented), so the host asks the cloud about every node alone; implement list-instances (contract 0.2.2) to cost one request per page instead",
            );
            return;
        }
        Err(why) => {
            checks.check(LISTING, None, Err(why));
            return;
        }
    };
    checks.check(
        LISTING,
        None,
        Ok(format!("{} instances in {pages} pages", instances.len())),
    );
    let index = ListingIndex::new(instances);
    let warm: Driver = h.warm.clone();
    for known in scenario.nodes.iter().filter(|n| n.expect.exists) {
        let node = &known.node;
        let outcome = match index.find(node) {
            // Safe (the host asks such a node alone), so not a failure; it only costs requests.
            None => {
                checks.skip(
                    AGREES,
                    Some(&node.name),
                    format!(
                        "the listing does not name node {} (by provider ID {:?}, else by a node-name listed once), so the host asks about it alone every pass",
                        node.name, node.provider_id
                    ),
                );
                continue;
            }
            Some(listed) => {
                let s = scope(&node.name);
                let metadata = warm.instance_metadata(node, &s).await.result;
                // The host answers the lifecycle pass from a listing only by provider ID (a
                // driver may decline to decide by name), so only such nodes compare shutdown.
                let shutdown = if node.provider_id.is_empty() {
                    None
                } else {
                    Some(match warm.instance_shutdown(node, &s).await.result {
                        Err(CallError::Provider(ProviderError::NotImplemented)) => Ok(false),
                        other => other,
                    })
                };
                agree(&listed, metadata, shutdown)
            }
        };
        checks.check(AGREES, Some(&node.name), outcome);
    }
    for node in &scenario.unknown_nodes {
        checks.check(
            UNKNOWN,
            Some(&node.name),
            match index.find(node) {
                None => Ok("not listed".into()),
                Some(listed) => Err(format!(
                    "listed as {} for a node the cloud does not have: the host would take it for existing and never delete the Node",
                    listed.metadata.provider_id
                )),
            },
        );
    }
}

/// Whether the listed instance says what the per-node calls said.
fn agree(
    listed: &ListedInstance,
    metadata: Result<wasm_ccm_runtime::types::InstanceMetadata, CallError>,
    shutdown: Option<Result<bool, CallError>>,
) -> Result<String, String> {
    let mut problems = Vec::new();
    match metadata {
        Ok(m) if m == listed.metadata => {}
        Ok(m) => problems.push(format!(
            "listed metadata {:?} differs from instance-metadata {m:?}",
            listed.metadata
        )),
        Err(e) => problems.push(format!(
            "listed, but instance-metadata failed ({e}); the host would initialise the node from the listing alone"
        )),
    }
    match shutdown {
        None => {}
        Some(Ok(s)) if s == listed.shutdown => {}
        Some(Ok(s)) => problems.push(format!(
            "listed shutdown = {}, instance-shutdown = {s}",
            listed.shutdown
        )),
        Some(Err(e)) => problems.push(format!("listed, but instance-shutdown failed ({e})")),
    }
    if problems.is_empty() {
        Ok(format!(
            "listed as {} with the per-node answers",
            listed.metadata.provider_id
        ))
    } else {
        Err(problems.join("; "))
    }
}
