//! Behavioural checks of `load-balancer`: the Service controller's sequence of calls, with the
//! results applied to the Service between calls the way the host applies them.

use std::net::IpAddr;
use std::sync::Arc;

use wasm_ccm_runtime::types::{EnsureResult, Ingress, Node, Service};
use wasm_ccm_runtime::{CallError, CallScope, StaticCluster};

use super::differences::{Differences, show};
use super::harness::Harness;
use super::report::Checks;
use super::scenario::{Scenario, ScenarioService};

/// A Service whose load balancer exists, as the host would now see it.
pub(super) struct Created {
    pub service: Service,
    /// The Service as the scenario gives it, before any result was applied.
    pub original: Service,
    pub nodes: Vec<Node>,
    pub subject: String,
}

/// What the host writes on the Service from an ensure result.
fn apply(service: &mut Service, r: &EnsureResult) {
    service.ingress = r.ingress.clone();
    for (k, v) in &r.set_annotations {
        match service.annotations.iter_mut().find(|(key, _)| key == k) {
            Some(slot) => slot.1 = v.clone(),
            None => service.annotations.push((k.clone(), v.clone())),
        }
    }
    service
        .annotations
        .retain(|(k, _)| !r.remove_annotations.contains(k));
}

/// The scope of a call on `service`: the cluster holds the Service as the host sees it.
fn scope_for(subject: &str, service: &Service) -> CallScope {
    CallScope {
        object: subject.to_string(),
        cluster: Arc::new(StaticCluster(vec![service.clone()])),
    }
}

fn ingress_ok(list: &[Ingress]) -> Result<(), String> {
    if list.is_empty() {
        return Err("ensure returned no ingress: the Service would get no address".into());
    }
    for g in list {
        match (&g.ip, &g.hostname) {
            (Some(ip), _) if ip.parse::<IpAddr>().is_err() => {
                return Err(format!("ingress ip `{ip}` is not an IP address"));
            }
            (None, None) => return Err("an ingress entry has neither ip nor hostname".into()),
            (None, Some(h)) if h.trim().is_empty() => {
                return Err("an ingress entry has an empty hostname".into());
            }
            _ => {}
        }
    }
    Ok(())
}

fn render(list: &[Ingress]) -> String {
    list.iter()
        .map(|g| g.ip.clone().or(g.hostname.clone()).unwrap_or_default())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The nodes backing `wanted`: those it names, else every node that exists.
fn backends(wanted: &ScenarioService, scenario: &Scenario) -> Vec<Node> {
    if wanted.backends.is_empty() {
        scenario
            .nodes
            .iter()
            .filter(|n| n.expect.exists)
            .map(|n| n.node.clone())
            .collect()
    } else {
        scenario.nodes_named(&wanted.backends)
    }
}

/// A Service the cloud cannot serve (the scenario's `expect-error`): `ensure` answers that case,
/// changes nothing in the cloud (nothing billed before everything checkable is checked), and
/// `get` still finds no load balancer.
pub(super) async fn check_refused(
    h: &mut Harness,
    wanted: &ScenarioService,
    case: &str,
    scenario: &Scenario,
    checks: &mut Checks,
) {
    let service = wanted.service.clone();
    let subject = format!("{}/{}", service.namespace, service.name);
    let nodes = backends(wanted, scenario);
    let sc = scope_for(&subject, &service);
    let o = h.warm.load_balancer_ensure(&service, &nodes, &sc).await;
    let traffic = h.observe("load-balancer.ensure", &o);
    let verdict = match &o.result {
        Err(CallError::Provider(e)) if e.case() == case && traffic.mutations.is_empty() => {
            Ok(format!(
                "refused as {case} before changing the cloud: {}",
                show(&o.result)
            ))
        }
        Err(CallError::Provider(e)) if e.case() == case => Err(format!(
            "refused as {case}, but only after changing the cloud: {}",
            traffic.mutations.join(", ")
        )),
        other => Err(format!(
            "ensure answered {}; the scenario expects {case}",
            show(other)
        )),
    };
    checks.check("load-balancer/refused", Some(subject.as_str()), verdict);
    let o = h.warm.load_balancer_get(&service, &sc).await;
    h.observe("load-balancer.get", &o);
    checks.check(
        "load-balancer/refused-leaves-nothing",
        Some(subject.as_str()),
        match o.result {
            Ok(None) => Ok("no load balancer after the refusal".into()),
            other => Err(format!(
                "get after a refused ensure returned {}; nothing may exist",
                show(&other)
            )),
        },
    );
}

/// Runs name, get, delete-absent, ensure (twice, and in a fresh instance), get and update for
/// one Service; returns it when its load balancer now exists.
pub(super) async fn check_service(
    h: &mut Harness,
    wanted: &ScenarioService,
    scenario: &Scenario,
    checks: &mut Checks,
    diffs: &mut Differences,
) -> Option<Created> {
    let mut service = wanted.service.clone();
    let subject = format!("{}/{}", service.namespace, service.name);
    let s = Some(subject.as_str());
    let nodes = backends(wanted, scenario);
    let (warm, fresh) = (h.warm.clone(), h.fresh.clone());

    // name: deterministic, no requests, same in a fresh instance.
    let sc = scope_for(&subject, &service);
    let mut names = Vec::new();
    let mut requests = 0;
    for driver in [&warm, &warm, &fresh] {
        let o = driver.load_balancer_name(&service, &sc).await;
        requests += h.observe("load-balancer.name", &o).requests;
        names.push(o.result);
    }
    checks.check(
        "load-balancer/name",
        s,
        match &names[0] {
            Err(e) => Err(format!("name failed: {e}")),
            Ok(n) if n.is_empty() => Err("name is empty".into()),
            Ok(n) if names.iter().any(|m| m.as_ref() != Ok(n)) => Err(format!(
                "name is not deterministic: {}",
                names.iter().map(show).collect::<Vec<_>>().join(" / ")
            )),
            Ok(_) if requests > 0 => Err(format!(
                "name made {requests} HTTP requests; it must be computed from the Service alone"
            )),
            Ok(n) => Ok(format!("`{n}`, the same in warm and fresh instances")),
        },
    );

    // Before anything exists: get says none, delete succeeds.
    let o = warm.load_balancer_get(&service, &sc).await;
    h.observe("load-balancer.get", &o);
    checks.check(
        "load-balancer/get-absent",
        s,
        match o.result {
            Ok(None) => Ok("none before ensure".into()),
            other => Err(format!(
                "get before any ensure returned {}; expected none",
                show(&other)
            )),
        },
    );
    let o = warm.load_balancer_delete(&service, &sc).await;
    h.observe("load-balancer.delete", &o);
    checks.check(
        "load-balancer/delete-absent",
        s,
        match o.result {
            Ok(()) => Ok("deleting a load balancer that never existed succeeds".into()),
            Err(e) => Err(format!(
                "delete of a never-created load balancer failed ({e}); it must succeed or the Service's finalizer is never removed"
            )),
        },
    );

    // ensure, until it stops asking to be called again.
    let before = service.clone();
    let (o, passes) = {
        let (service, nodes, sc) = (&service, &nodes, &sc);
        let warm = &warm;
        h.converge("load-balancer.ensure", move || {
            warm.load_balancer_ensure(service, nodes, sc)
        })
        .await
    };
    let first = match o.result {
        Ok(r) => r,
        Err(e) => {
            checks.check(
                "load-balancer/ensure",
                s,
                Err(format!("ensure failed after {passes} passes: {e}")),
            );
            return None;
        }
    };
    checks.check(
        "load-balancer/ensure",
        s,
        ingress_ok(&first.ingress).map(|()| {
            format!(
                "ingress {} after {passes} pass{}",
                render(&first.ingress),
                if passes == 1 { "" } else { "es" }
            )
        }),
    );
    checks.check(
        "load-balancer/inputs-unchanged",
        s,
        if service == before {
            Ok("the Service handed to ensure is unchanged".into())
        } else {
            Err("the Service value changed during ensure".into())
        },
    );
    apply(&mut service, &first);
    let sc = scope_for(&subject, &service);

    // Again, warm and fresh: the same answer and no change in the cloud.
    let mut problems = Vec::new();
    let mut fresh_ensure = None;
    for (label, driver) in [("warm", &warm), ("fresh", &fresh)] {
        let o = driver.load_balancer_ensure(&service, &nodes, &sc).await;
        let traffic = h.observe("load-balancer.ensure", &o);
        if !traffic.mutations.is_empty() {
            problems.push(format!(
                "the second ensure ({label} instance) changed the cloud: {}",
                traffic.mutations.join(", ")
            ));
        }
        match &o.result {
            Ok(r) => {
                let mut again = service.clone();
                apply(&mut again, r);
                if again != service {
                    problems.push(format!(
                        "the second ensure ({label} instance) returned a different result: ingress {} (first: {}), annotations {:?}",
                        render(&r.ingress),
                        render(&first.ingress),
                        r.set_annotations
                    ));
                }
            }
            Err(e) => problems.push(format!("the second ensure ({label} instance) failed: {e}")),
        }
        if label == "fresh" {
            fresh_ensure = Some(o.result.map(|r| r.ingress));
        }
    }
    checks.check(
        "load-balancer/ensure-idempotent",
        s,
        if problems.is_empty() {
            Ok("same result, no mutating request, in warm and fresh instances".into())
        } else {
            Err(problems.join("; "))
        },
    );
    if let Some(fresh) = fresh_ensure {
        diffs.compare(
            "load-balancer.ensure",
            &subject,
            &Ok::<_, CallError>(first.ingress.clone()),
            &fresh,
        );
    }

    // get agrees with ensure, warm and fresh.
    let g_warm = warm.load_balancer_get(&service, &sc).await;
    h.observe("load-balancer.get", &g_warm);
    let g_fresh = fresh.load_balancer_get(&service, &sc).await;
    h.note_denied("load-balancer.get", &g_fresh);
    diffs.compare(
        "load-balancer.get",
        &subject,
        &g_warm.result,
        &g_fresh.result,
    );
    checks.check(
        "load-balancer/get",
        s,
        match &g_warm.result {
            Ok(Some(list)) if *list == first.ingress => Ok(format!("ingress {}", render(list))),
            other => Err(format!(
                "get after ensure returned {}; expected the ingress ensure returned ({})",
                show(other),
                render(&first.ingress)
            )),
        },
    );

    // update with one backend fewer, twice: the second changes nothing.
    if nodes.len() >= 2 {
        let fewer = &nodes[..nodes.len() - 1];
        let mut problems = Vec::new();
        for round in ["first", "second"] {
            let o = warm.load_balancer_update(&service, fewer, &sc).await;
            let traffic = h.observe("load-balancer.update", &o);
            if let Err(e) = &o.result {
                problems.push(format!("the {round} update failed: {e}"));
            } else if round == "second" && !traffic.mutations.is_empty() {
                problems.push(format!(
                    "the second update with the same nodes changed the cloud: {}",
                    traffic.mutations.join(", ")
                ));
            }
        }
        checks.check(
            "load-balancer/update",
            s,
            if problems.is_empty() {
                Ok(format!(
                    "update to {} nodes applied once, then a no-op",
                    fewer.len()
                ))
            } else {
                Err(problems.join("; "))
            },
        );
    } else {
        checks.skip(
            "load-balancer/update",
            s,
            "the scenario gives this Service fewer than two backends",
        );
    }
    Some(Created {
        service,
        original: wanted.service.clone(),
        nodes,
        subject,
    })
}

/// Deletes a created load balancer twice and checks it is gone.
pub(super) async fn check_delete(h: &mut Harness, created: &Created, checks: &mut Checks) {
    let s = Some(created.subject.as_str());
    let sc = scope_for(&created.subject, &created.service);
    let warm = h.warm.clone();
    let (o, passes) = {
        let (service, sc, warm) = (&created.service, &sc, &warm);
        h.converge("load-balancer.delete", move || {
            warm.load_balancer_delete(service, sc)
        })
        .await
    };
    // Asked for the Service as first seen: what the driver wrote on it (annotations, status) is
    // no proof the load balancer exists; the cloud's answer is.
    let g = warm.load_balancer_get(&created.original, &sc).await;
    h.observe("load-balancer.get", &g);
    checks.check(
        "load-balancer/delete",
        s,
        match (o.result, g.result) {
            (Ok(()), Ok(None)) => Ok(format!("deleted after {passes} pass(es); get says none")),
            (Err(e), _) => Err(format!("delete failed: {e}")),
            (Ok(()), other) => Err(format!(
                "delete succeeded but get still returns {}",
                show(&other)
            )),
        },
    );
    let o = warm.load_balancer_delete(&created.service, &sc).await;
    h.observe("load-balancer.delete", &o);
    checks.check(
        "load-balancer/delete-idempotent",
        s,
        match o.result {
            Ok(()) => Ok("a second delete succeeds".into()),
            Err(e) => Err(format!("a second delete failed: {e}")),
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_applied_like_the_host() {
        let mut s = Service {
            namespace: "default".into(),
            name: "web".into(),
            uid: "u".into(),
            labels: vec![],
            annotations: vec![("keep".into(), "1".into()), ("drop".into(), "x".into())],
            ports: vec![],
            external_traffic_policy: wasm_ccm_runtime::types::TrafficPolicy::Cluster,
            health_check_node_port: 0,
            load_balancer_ip: None,
            load_balancer_source_ranges: vec![],
            session_affinity: wasm_ccm_runtime::types::SessionAffinity::None,
            session_affinity_timeout: None,
            ip_families: vec![],
            load_balancer_class: None,
            ingress: vec![],
        };
        let r = EnsureResult {
            ingress: vec![Ingress {
                ip: Some("192.0.2.1".into()),
                hostname: None,
                ip_mode: None,
            }],
            set_annotations: vec![("keep".into(), "2".into()), ("new".into(), "3".into())],
            remove_annotations: vec!["drop".into()],
        };
        apply(&mut s, &r);
        assert_eq!(
            s.annotations,
            vec![("keep".into(), "2".into()), ("new".into(), "3".into())]
        );
        assert!(ingress_ok(&s.ingress).is_ok());
        assert!(ingress_ok(&[]).is_err());
    }
}
