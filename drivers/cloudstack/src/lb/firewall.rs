//! Opening the load balancer's ports (upstream `updateFirewallRule`, `updateNetworkACL`): firewall
//! rules on the public IP in an isolated network, network ACL entries on a VPC tier.

use wasm_ccm_sdk::log;
use wasm_ccm_sdk::types::ProviderError;

use crate::api::{Api, Budget, Params};
use crate::lb::spec::{ANYWHERE, same_cidrs};
use crate::model::{AclItem, AclList, FirewallRule, Network, split_cidrs};

/// The ACL lists CloudStack manages itself; entries are never added to them.
const SYSTEM_ACLS: &[&str] = &["default_allow", "default_deny"];

/// One opened port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Opening {
    /// `tcp` or `udp` (never `tcp-proxy`: not a valid firewall or ACL protocol).
    pub protocol: &'static str,
    /// The public port to open: the Service port.
    pub port: u16,
}

fn single_port(startport: Option<u16>, endport: Option<u16>, port: u16) -> bool {
    startport == Some(port) && endport == Some(port)
}

/// The firewall rules on an IP.
fn firewall_rules(api: &Api, ip_id: &str) -> Result<Vec<FirewallRule>, ProviderError> {
    api.list(
        "listFirewallRules",
        api.scoped(
            Params::new()
                .set("ipaddressid", ip_id)
                .set("listall", "true"),
        )?,
        "firewallrule",
    )
}

/// Makes each opening's firewall rules on `ip_id` exactly one rule with `cidrs`: keeps one that
/// matches, deletes other rules of the same protocol and port, creates one if none matched.
pub fn reconcile_firewall(
    api: &Api,
    ip_id: &str,
    openings: &[Opening],
    cidrs: &[String],
    budget: &Budget,
) -> Result<(), ProviderError> {
    let existing = firewall_rules(api, ip_id)?;
    for o in openings {
        let mut kept = false;
        for rule in existing
            .iter()
            .filter(|r| r.protocol == o.protocol && single_port(r.startport, r.endport, o.port))
        {
            if !kept && same_cidrs(&split_cidrs(&rule.cidrlist), cidrs) {
                kept = true;
            } else {
                api.run(
                    "deleteFirewallRule",
                    Params::new().set("id", &rule.id),
                    budget,
                )?;
            }
        }
        if !kept {
            api.run(
                "createFirewallRule",
                Params::new()
                    .set("ipaddressid", ip_id)
                    .set("protocol", o.protocol)
                    .set("cidrlist", cidrs.join(","))
                    .set("startport", o.port.to_string())
                    .set("endport", o.port.to_string()),
                budget,
            )?;
        }
    }
    Ok(())
}

/// Deletes the firewall rules of `openings` on `ip_id`.
pub fn close_firewall(
    api: &Api,
    ip_id: &str,
    openings: &[Opening],
    budget: &Budget,
) -> Result<(), ProviderError> {
    for rule in firewall_rules(api, ip_id)? {
        if openings.iter().any(|o| {
            rule.protocol == o.protocol && single_port(rule.startport, rule.endport, o.port)
        }) {
            api.run(
                "deleteFirewallRule",
                Params::new().set("id", &rule.id),
                budget,
            )?;
        }
    }
    Ok(())
}

/// The tier's ACL list, `None` when it is a system list (nothing to add there).
fn acl_list(api: &Api, network: &Network) -> Result<Option<AclList>, ProviderError> {
    if network.aclid.is_empty() {
        return Ok(None);
    }
    // Scoped: CloudStack finds a project's ACL list by id only with its projectid.
    let lists: Vec<AclList> = api.list(
        "listNetworkACLLists",
        api.scoped(Params::new().set("id", &network.aclid))?,
        "networkacllist",
    )?;
    Ok(lists
        .into_iter()
        .find(|l| l.id == network.aclid)
        .filter(|l| !SYSTEM_ACLS.contains(&l.name.as_str())))
}

fn acl_items(api: &Api, list: &AclList, network: &Network) -> Result<Vec<AclItem>, ProviderError> {
    api.list(
        "listNetworkACLs",
        api.scoped(
            Params::new()
                .set("aclid", &list.id)
                .set("networkid", &network.id),
        )?,
        "networkacl",
    )
}

/// Whether the entry lets `cidrs` in on the opening: an Allow Ingress entry for its protocol
/// (or all) covering the port, open to everyone or to exactly `cidrs` (so a changed list gets
/// an entry of its own).
fn allows_from(item: &AclItem, o: &Opening, cidrs: &[String]) -> bool {
    let theirs = split_cidrs(&item.cidrlist);
    allows(item, o) && (theirs.iter().any(|c| c == ANYWHERE) || same_cidrs(&theirs, cidrs))
}

fn allows(item: &AclItem, o: &Opening) -> bool {
    let covers = match (item.startport, item.endport) {
        (Some(start), Some(end)) => start <= o.port && o.port <= end,
        _ => item.protocol == "all",
    };
    !item.traffictype.eq_ignore_ascii_case("egress")
        && item.action.eq_ignore_ascii_case("allow")
        && (item.protocol == o.protocol || item.protocol == "all")
        && covers
}

/// Adds an Allow Ingress entry for each opening the tier's ACL does not allow yet. A system ACL
/// list is left alone (upstream does the same).
pub fn open_acl(
    api: &Api,
    network: &Network,
    openings: &[Opening],
    cidrs: &[String],
    budget: &Budget,
) -> Result<(), ProviderError> {
    let Some(list) = acl_list(api, network)? else {
        log::info(
            "the VPC tier uses a system ACL list; no entries added",
            &[("network", &network.id), ("acl", &network.aclid)],
        );
        return Ok(());
    };
    let items = acl_items(api, &list, network)?;
    for o in openings {
        if items.iter().any(|i| allows_from(i, o, cidrs)) {
            continue;
        }
        api.run(
            "createNetworkACL",
            Params::new()
                .set("protocol", o.protocol)
                .set("aclid", &list.id)
                .set("action", "Allow")
                .set(
                    "cidrlist",
                    if cidrs.is_empty() {
                        ANYWHERE.to_string()
                    } else {
                        cidrs.join(",")
                    },
                )
                .set("startport", o.port.to_string())
                .set("endport", o.port.to_string())
                .set("networkid", &network.id)
                .set("traffictype", "Ingress"),
            budget,
        )?;
    }
    Ok(())
}

/// Deletes, per opening, the first single-port Allow entry for it (upstream's rule). The caller
/// passes only openings no other load balancer on the tier still uses: ACL lists are shared.
pub fn close_acl(
    api: &Api,
    network: &Network,
    openings: &[Opening],
    budget: &Budget,
) -> Result<(), ProviderError> {
    let Some(list) = acl_list(api, network)? else {
        return Ok(());
    };
    let items = acl_items(api, &list, network)?;
    for o in openings {
        if let Some(item) = items.iter().find(|i| {
            i.protocol == o.protocol && single_port(i.startport, i.endport, o.port) && allows(i, o)
        }) {
            api.run(
                "deleteNetworkACL",
                Params::new().set("id", &item.id),
                budget,
            )?;
        }
    }
    Ok(())
}
