//! Behavioural checks of `routes`: the route controller lists, creates the missing routes and
//! deletes the stale ones, again and again.

use std::net::IpAddr;

use wasm_ccm_runtime::CallError;
use wasm_ccm_runtime::types::Route;

use super::differences::{Differences, show};
use super::harness::{Harness, scope};
use super::report::Checks;
use super::scenario::Scenario;

/// `10.244.1.0/24` or `fd00::/64`.
fn is_cidr(s: &str) -> bool {
    let Some((ip, prefix)) = s.split_once('/') else {
        return false;
    };
    let Ok(ip) = ip.parse::<IpAddr>() else {
        return false;
    };
    let max = if ip.is_ipv4() { 32 } else { 128 };
    prefix.parse::<u8>().is_ok_and(|p| p <= max)
}

fn well_formed(routes: &[Route]) -> Result<String, String> {
    let problems: Vec<String> = routes
        .iter()
        .filter_map(|r| {
            if r.name.is_empty() {
                Some(format!("a route to {} has no name", r.destination_cidr))
            } else if !is_cidr(&r.destination_cidr) {
                Some(format!(
                    "route {}: `{}` is not a CIDR",
                    r.name, r.destination_cidr
                ))
            } else if r.target_node.is_empty() && !r.blackhole {
                Some(format!("route {} has no target node", r.name))
            } else {
                None
            }
        })
        .collect();
    if problems.is_empty() {
        Ok(format!("{} routes", routes.len()))
    } else {
        Err(problems.join("; "))
    }
}

/// Lists, warm and fresh; returns the warm answer.
async fn list(
    h: &mut Harness,
    diffs: &mut Differences,
    when: &str,
) -> Result<Vec<Route>, CallError> {
    let sc = scope("");
    let warm = h.warm.routes_list(&sc).await;
    h.observe("routes.list", &warm);
    let fresh = h.fresh.routes_list(&sc).await;
    h.note_denied("routes.list", &fresh);
    diffs.compare("routes.list", when, &warm.result, &fresh.result);
    warm.result
}

fn matching<'a>(routes: &'a [Route], wanted: &Route) -> Vec<&'a Route> {
    routes
        .iter()
        .filter(|r| {
            r.destination_cidr == wanted.destination_cidr && r.target_node == wanted.target_node
        })
        .collect()
}

/// list; then for each scenario route: create, create again, delete, delete again.
pub(super) async fn check(
    h: &mut Harness,
    scenario: &Scenario,
    checks: &mut Checks,
    diffs: &mut Differences,
) {
    let before = list(h, diffs, "before").await;
    checks.check(
        "routes/list",
        None,
        match &before {
            Ok(routes) => well_formed(routes),
            Err(e) => Err(format!("routes.list failed: {e}")),
        },
    );
    if before.is_err() {
        return;
    }
    let warm = h.warm.clone();
    for wanted in &scenario.routes {
        let subject = format!("{} → {}", wanted.destination_cidr, wanted.target_node);
        let s = Some(subject.as_str());
        let node = scenario
            .nodes
            .iter()
            .find(|n| n.node.name == wanted.target_node)
            .map(|n| n.node.clone());
        let Some(node) = node else { continue };
        let route = Route {
            name: String::new(),
            target_node: node.name.clone(),
            target_node_addresses: node.addresses.clone(),
            destination_cidr: wanted.destination_cidr.clone(),
            blackhole: false,
        };
        let hint = if node.uid.is_empty() {
            node.name.clone()
        } else {
            node.uid.clone()
        };
        let sc = scope(&subject);

        let mut created = Vec::new();
        for round in ["create", "create-idempotent"] {
            let o = warm.routes_create(&hint, &route, &sc).await;
            h.observe("routes.create", &o);
            let after = list(h, diffs, &format!("after {round} {subject}")).await;
            let outcome = match (o.result, &after) {
                (Err(e), _) => Err(format!("routes.create failed: {e}")),
                (Ok(()), Err(e)) => Err(format!("routes.list after create failed: {e}")),
                (Ok(()), Ok(routes)) => match matching(routes, &route)[..] {
                    [one] => {
                        created = vec![one.clone()];
                        Ok(format!("listed as {}", one.name))
                    }
                    [] => Err("create succeeded but list does not show the route".into()),
                    ref many => Err(format!(
                        "list shows {} routes for one destination after creating it twice",
                        many.len()
                    )),
                },
            };
            checks.check(&format!("routes/{round}"), s, outcome);
        }
        let Some(listed) = created.pop() else {
            continue;
        };
        for round in ["delete", "delete-idempotent"] {
            let o = warm.routes_delete(&listed, &sc).await;
            h.observe("routes.delete", &o);
            let after = list(h, diffs, &format!("after {round} {subject}")).await;
            let outcome = match (o.result, &after) {
                (Err(e), _) => Err(format!("routes.delete failed: {e}")),
                (Ok(()), Ok(routes)) if matching(routes, &route).is_empty() => {
                    Ok("gone from the list".into())
                }
                (Ok(()), other) => Err(format!(
                    "delete succeeded but list still returns {}",
                    show(other)
                )),
            };
            checks.check(&format!("routes/{round}"), s, outcome);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs() {
        assert!(is_cidr("10.244.1.0/24"));
        assert!(is_cidr("fd00::/64"));
        assert!(!is_cidr("10.244.1.0"));
        assert!(!is_cidr("10.244.1.0/33"));
        assert!(!is_cidr("pods/24"));
    }
}
