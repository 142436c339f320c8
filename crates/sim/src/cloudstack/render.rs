//! How each entity renders as JSON, field for field as CloudStack's response objects: ports of
//! load-balancer rules and ACL items are strings, of firewall rules integers; optional fields
//! are omitted rather than null.

use serde_json::{Map, Value, json};

use super::CidrSeparator;
use super::model::{
    AclItem, AclList, FirewallRule, LbRule, Network, Project, PublicIp, State, Tag, Vm, Zone,
};

/// The domain every entity is in.
pub(crate) const DOMAIN: &str = "ROOT";

/// CloudStack's timestamp format, e.g. `2026-01-02T03:04:05+0000`.
pub(crate) fn cs_time(ts: jiff::Timestamp) -> String {
    ts.strftime("%Y-%m-%dT%H:%M:%S%z").to_string()
}

/// Now, in [`cs_time`] format.
pub(crate) fn now_cs() -> String {
    cs_time(jiff::Timestamp::now())
}

/// Adds `key: value` when the value is there.
fn put(map: &mut Map<String, Value>, key: &str, value: Option<impl Into<Value>>) {
    if let Some(v) = value {
        map.insert(key.to_string(), v.into());
    }
}

/// Takes the object out of a `json!` literal.
fn object(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

impl State {
    fn zone_name(&self, id: &str) -> String {
        self.zone(id).map(|z| z.name.clone()).unwrap_or_default()
    }

    fn account_name(&self) -> &'static str {
        self.user_name()
    }

    /// `account`, `domainid`, `domain`, and `projectid`/`project` for project entities.
    fn owner(&self, map: &mut Map<String, Value>, project: Option<&str>) {
        map.insert("account".into(), self.account_name().into());
        map.insert("domainid".into(), self.account.domain_id.clone().into());
        map.insert("domain".into(), DOMAIN.into());
        if let Some(p) = project {
            map.insert("projectid".into(), p.into());
            put(map, "project", self.project(p).map(|p| p.name.clone()));
        }
    }
}

/// A zone (`zone`).
pub(crate) fn render_zone(zone: &Zone) -> Value {
    json!({
        "id": zone.id,
        "name": zone.name,
        "networktype": "Advanced",
        "allocationstate": "Enabled",
        "securitygroupsenabled": false,
        "localstorageenabled": false,
        "tags": [],
    })
}

/// A project (`project`).
pub(crate) fn render_project(state: &State, project: &Project) -> Value {
    json!({
        "id": project.id,
        "name": project.name,
        "displaytext": project.name,
        "domainid": state.account.domain_id,
        "domain": DOMAIN,
        "state": "Active",
        "owner": [{"account": state.user_name()}],
        "tags": [],
    })
}

/// A guest network (`network`).
pub(crate) fn render_network(state: &State, network: &Network) -> Value {
    let tier = network.vpc_id.is_some();
    let provider = if tier {
        "VpcVirtualRouter"
    } else {
        "VirtualRouter"
    };
    let services: Vec<Value> = network
        .services()
        .iter()
        .map(|s| json!({"name": s, "provider": [{"name": provider}], "capability": []}))
        .collect();
    let mut map = object(json!({
        "id": network.id,
        "name": network.name,
        "displaytext": network.name,
        "zoneid": network.zone_id,
        "zonename": state.zone_name(&network.zone_id),
        "type": "Isolated",
        "traffictype": "Guest",
        "state": "Implemented",
        "acltype": "Account",
        "service": services,
        "tags": [],
    }));
    put(&mut map, "vpcid", network.vpc_id.clone());
    put(&mut map, "aclid", network.acl_id.clone());
    put(
        &mut map,
        "aclname",
        network
            .acl_id
            .as_deref()
            .and_then(|a| state.acl_list(a))
            .map(|a| a.name.clone()),
    );
    state.owner(&mut map, network.project.as_deref());
    Value::Object(map)
}

/// A virtual machine (`virtualmachine`). `hostname` (the hypervisor host) only for admins.
pub(crate) fn render_vm(state: &State, vm: &Vm) -> Value {
    let nics: Vec<Value> = vm
        .nics
        .iter()
        .enumerate()
        .map(|(i, nic)| {
            let network = state.network(&nic.network_id);
            let mut map = object(json!({
                "id": nic.id,
                "networkid": nic.network_id,
                "networkname": network.map(|n| n.name.clone()).unwrap_or_default(),
                "ipaddress": nic.ip,
                "isdefault": i == 0,
                "traffictype": "Guest",
                "type": "Isolated",
                "macaddress": mac_address(nic.seq),
            }));
            put(&mut map, "ip6address", nic.ip6.clone());
            Value::Object(map)
        })
        .collect();
    let mut map = object(json!({
        "id": vm.id,
        "name": vm.name,
        "displayname": vm.display_name,
        "created": vm.created,
        "state": vm.state,
        "haenable": false,
        "zoneid": vm.zone_id,
        "zonename": state.zone_name(&vm.zone_id),
        "serviceofferingid": state.offerings.get(&vm.offering).cloned().unwrap_or_default(),
        "serviceofferingname": vm.offering,
        "hypervisor": "KVM",
        "nic": nics,
        "tags": [],
        "affinitygroup": [],
        "securitygroup": [],
    }));
    if state.settings.admin {
        put(&mut map, "hostname", vm.host.clone());
    }
    if let Some(ip) = state
        .ips
        .iter()
        .find(|ip| ip.static_nat_vm.as_deref() == Some(vm.id.as_str()))
    {
        map.insert("publicip".into(), ip.address.clone().into());
        map.insert("publicipid".into(), ip.id.clone().into());
    }
    state.owner(&mut map, vm.project.as_deref());
    Value::Object(map)
}

/// A locally administered MAC address from a sequence number.
fn mac_address(seq: u64) -> String {
    let b = seq.to_be_bytes();
    format!("02:00:{:02x}:{:02x}:{:02x}:{:02x}", b[4], b[5], b[6], b[7])
}

/// A public IP address (`publicipaddress`, or `ipaddress` in a job result).
pub(crate) fn render_ip(state: &State, ip: &PublicIp) -> Value {
    let zone = state.zone(&ip.zone_id);
    let mut map = object(json!({
        "id": ip.id,
        "ipaddress": ip.address,
        "state": ip.state.as_str(),
        "issourcenat": ip.source_nat,
        "isstaticnat": ip.static_nat_vm.is_some(),
        "issystem": false,
        "zoneid": ip.zone_id,
        "zonename": zone.map(|z| z.name.clone()).unwrap_or_default(),
        "networkid": zone.map(|z| z.public_network_id.clone()).unwrap_or_default(),
        "forvirtualnetwork": true,
        "tags": state
            .tags_of("PublicIpAddress", &ip.id)
            .into_iter()
            .map(|t| render_tag(state, t))
            .collect::<Vec<_>>(),
    }));
    put(&mut map, "allocated", ip.allocated.clone());
    put(&mut map, "associatednetworkid", ip.network_id.clone());
    put(
        &mut map,
        "associatednetworkname",
        ip.network_id
            .as_deref()
            .and_then(|n| state.network(n))
            .map(|n| n.name.clone()),
    );
    put(&mut map, "vpcid", ip.vpc_id.clone());
    if let Some(vm) = ip.static_nat_vm.as_deref().and_then(|v| state.vm(v)) {
        map.insert("virtualmachineid".into(), vm.id.clone().into());
        map.insert("virtualmachinename".into(), vm.name.clone().into());
    }
    // A free address belongs to nobody.
    if ip.state != super::model::IpState::Free {
        state.owner(&mut map, ip.project.as_deref());
    }
    Value::Object(map)
}

/// A resource tag (`tag`, and the items of an entity's `tags`): `ResourceTagResponse`.
pub(crate) fn render_tag(state: &State, tag: &Tag) -> Value {
    let mut map = object(json!({
        "key": tag.key,
        "value": tag.value,
        "resourcetype": tag.resource_type,
        "resourceid": tag.resource_id,
    }));
    state.owner(&mut map, tag.project.as_deref());
    put(&mut map, "customer", tag.customer.clone());
    Value::Object(map)
}

/// Joins a load-balancer rule's CIDRs with the configured separator.
fn join_cidrs(cidrs: &[String], separator: CidrSeparator) -> String {
    match separator {
        CidrSeparator::Comma => cidrs.join(","),
        CidrSeparator::Space => cidrs.join(" "),
    }
}

/// A load-balancer rule (`loadbalancerrule`, or `loadbalancer` in a job result).
pub(crate) fn render_lb_rule(state: &State, rule: &LbRule) -> Value {
    let ip = state.ip(&rule.ip_id);
    let mut map = object(json!({
        "id": rule.id,
        "name": rule.name,
        "algorithm": rule.algorithm,
        "protocol": rule.protocol,
        "publicip": ip.map(|i| i.address.clone()).unwrap_or_default(),
        "publicipid": rule.ip_id,
        "publicport": rule.public_port.to_string(),
        "privateport": rule.private_port.to_string(),
        "networkid": rule.network_id,
        "cidrlist": join_cidrs(&rule.cidrs, state.settings.cidr_separator),
        "state": rule.state.as_str(),
        "zoneid": rule.zone_id,
        "zonename": state.zone_name(&rule.zone_id),
        "fordisplay": true,
        "tags": [],
    }));
    put(&mut map, "description", rule.description.clone());
    state.owner(&mut map, rule.project.as_deref());
    Value::Object(map)
}

/// A firewall rule (`firewallrule`).
pub(crate) fn render_firewall_rule(state: &State, rule: &FirewallRule) -> Value {
    let ip = state.ip(&rule.ip_id);
    let mut map = object(json!({
        "id": rule.id,
        "protocol": rule.protocol,
        "ipaddressid": rule.ip_id,
        "ipaddress": ip.map(|i| i.address.clone()).unwrap_or_default(),
        "cidrlist": rule.cidrs.join(","),
        "state": rule.state.as_str(),
        "purpose": "Firewall",
        "fordisplay": true,
        "tags": [],
    }));
    put(&mut map, "startport", rule.start_port);
    put(&mut map, "endport", rule.end_port);
    put(&mut map, "networkid", ip.and_then(|i| i.network_id.clone()));
    Value::Object(map)
}

/// A network ACL list (`networkacllist`).
pub(crate) fn render_acl_list(acl: &AclList) -> Value {
    let mut map = object(json!({
        "id": acl.id,
        "name": acl.name,
        "description": acl.description,
        "fordisplay": true,
    }));
    put(&mut map, "vpcid", acl.vpc_id.clone());
    Value::Object(map)
}

/// A network ACL item (`networkacl`).
pub(crate) fn render_acl_item(state: &State, item: &AclItem) -> Value {
    let mut map = object(json!({
        "id": item.id,
        "protocol": item.protocol,
        "cidrlist": item.cidrs.join(","),
        "action": item.action,
        "traffictype": item.traffic_type,
        "aclid": item.acl_id,
        "aclname": state.acl_list(&item.acl_id).map(|a| a.name.clone()).unwrap_or_default(),
        "number": item.number,
        "state": item.state.as_str(),
        "fordisplay": true,
        "tags": [],
    }));
    put(
        &mut map,
        "startport",
        item.start_port.map(|p| p.to_string()),
    );
    put(&mut map, "endport", item.end_port.map(|p| p.to_string()));
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        let ts: jiff::Timestamp = "2026-01-02T03:04:05Z".parse().expect("timestamp");
        assert_eq!(cs_time(ts), "2026-01-02T03:04:05+0000");
        assert_eq!(mac_address(258), "02:00:00:00:01:02");
        let cidrs = vec!["10.0.0.0/8".to_string(), "192.0.2.0/24".to_string()];
        assert_eq!(
            join_cidrs(&cidrs, CidrSeparator::Space),
            "10.0.0.0/8 192.0.2.0/24"
        );
        assert_eq!(
            join_cidrs(&cidrs, CidrSeparator::Comma),
            "10.0.0.0/8,192.0.2.0/24"
        );
    }
}
