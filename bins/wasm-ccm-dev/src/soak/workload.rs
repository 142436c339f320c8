//! The workload: what a cluster's users and its machines do. Nodes join (an instance, then a
//! kubelet registering a tainted Node), leave, have their instance deleted or shut down and
//! started again; Services are created (some of another load balancer class, some not of type
//! LoadBalancer), get port, annotation, type and class changes, and are deleted.
//!
//! The model records what the workload did, never what the controllers did, so the choice of
//! each step depends on the seed alone (except when a write of the workload itself is refused,
//! which the history shows).

use std::collections::BTreeMap;

use serde_json::{Value, json};
use wasm_ccm_sim::kube::KubeSim;

use super::rng::SplitMix64;
use wasm_ccm_sim::kit::SimNode;
use wasm_ccm_sim::kit::soak::SoakCloud;

/// The taint a kubelet with `--cloud-provider=external` registers its Node with.
pub(super) const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";
/// The finalizer the service controller puts on Services it provisioned.
pub(super) const FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";
/// A load balancer class that is not the CCM's: such Services are someone else's.
pub(super) const FOREIGN_CLASS: &str = "example.com/other-lb";
/// The label that takes a node out of every load balancer (unless its value parses as false).
pub(super) const EXCLUDE_LB_LABEL: &str = "node.kubernetes.io/exclude-from-external-load-balancers";
/// Values the workload sets the label to: Go's `strconv.ParseBool` true (excluded) and false
/// (included), and values it cannot parse (excluded, as upstream).
const EXCLUDE_VALUES: &[&str] = &["true", "false", "", "yes", "1"];
/// Where the workload's Services live.
pub(super) const NAMESPACE: &str = "default";

const MIN_NODES: usize = 2;
/// How long a Node whose instance was deleted before it was initialised is left to the
/// controllers before the operator deletes it.
const ORPHAN_GRACE: std::time::Duration = std::time::Duration::from_secs(10);
const MAX_NODES: usize = 8;
const MAX_SERVICES: usize = 10;

/// A workload operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Op {
    /// An instance is created and its kubelet registers a Node.
    NodeJoin,
    /// A node is drained away: its Node is deleted, then its instance.
    NodeLeave,
    /// An instance is deleted under its Node (which stops reporting Ready).
    InstanceDelete,
    /// An instance is powered off (its Node stops reporting Ready).
    InstanceShutdown,
    /// A powered-off instance is started again (its Node reports Ready).
    InstanceStart,
    /// A Service is created.
    ServiceCreate,
    /// A Service's ports change (a port number, or a port added or removed).
    PortChange,
    /// A driver annotation changes.
    AnnotationChange,
    /// A Service changes between LoadBalancer and ClusterIP.
    TypeChange,
    /// A Service moves between the CCM's class and another one (through ClusterIP: the class is
    /// immutable while the type is LoadBalancer).
    ClassChange,
    /// A Service is deleted.
    ServiceDelete,
    /// A node's exclusion label (`node.kubernetes.io/exclude-from-external-load-balancers`) is
    /// set to a value (true, false, unparsable) or removed.
    NodeExclude,
}

impl Op {
    /// Every operation; the deck draws each once per round.
    pub(crate) const ALL: [Op; 12] = [
        Op::NodeJoin,
        Op::NodeLeave,
        Op::InstanceDelete,
        Op::InstanceShutdown,
        Op::InstanceStart,
        Op::ServiceCreate,
        Op::PortChange,
        Op::AnnotationChange,
        Op::TypeChange,
        Op::ClassChange,
        Op::ServiceDelete,
        Op::NodeExclude,
    ];

    /// The name in the summary.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Op::NodeJoin => "node_join",
            Op::NodeLeave => "node_leave",
            Op::InstanceDelete => "instance_delete",
            Op::InstanceShutdown => "instance_shutdown",
            Op::InstanceStart => "instance_start",
            Op::ServiceCreate => "service_create",
            Op::PortChange => "port_change",
            Op::AnnotationChange => "annotation_change",
            Op::TypeChange => "type_change",
            Op::ClassChange => "class_change",
            Op::ServiceDelete => "service_delete",
            Op::NodeExclude => "node_exclude",
        }
    }
}

/// What the workload did to a node.
#[derive(Debug, Clone)]
pub(crate) struct NodeState {
    /// The instance ID in the cloud.
    pub instance: String,
    /// Whether the workload deleted the instance.
    pub instance_deleted: bool,
    /// Whether the workload deleted the Node itself (a node leaving).
    pub node_deleted: bool,
    /// Whether the instance is powered off.
    pub stopped: bool,
    /// When the workload deleted the instance.
    pub instance_deleted_at: Option<std::time::Instant>,
}

impl NodeState {
    /// Whether the node is still part of the cluster as far as the workload is concerned.
    fn live(&self) -> bool {
        !self.instance_deleted && !self.node_deleted
    }
}

/// How a Service is set up now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// type LoadBalancer without a class: the CCM's.
    Ours,
    /// type LoadBalancer of another class.
    Foreign,
    /// type ClusterIP.
    ClusterIp,
}

/// What the workload did to a Service.
#[derive(Debug, Clone)]
pub(crate) struct ServiceState {
    /// Its shape now.
    pub shape: Shape,
    /// Whether it was ever the CCM's (a Service that never was must never be written by it).
    pub ever_ours: bool,
    /// Whether the workload deleted it.
    pub deleted: bool,
    /// Its ports.
    pub ports: Vec<u16>,
    /// Its UID (what the cloud objects are named for).
    pub uid: String,
}

/// Everything the workload did so far.
#[derive(Debug, Default)]
pub(crate) struct Model {
    /// Every node ever created, by name (names are never reused).
    pub nodes: BTreeMap<String, NodeState>,
    /// Every Service ever created, by name (names are never reused).
    pub services: BTreeMap<String, ServiceState>,
    next_node: usize,
    next_service: usize,
}

fn node_object(name: &str, index: usize, ready: bool) -> Value {
    let ip = format!("10.0.{}.{}", index / 250, index % 250 + 1);
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
            "annotations": {"alpha.kubernetes.io/provided-node-ip": ip},
        },
        "spec": {"taints": [{"key": UNINITIALIZED, "value": "true", "effect": "NoSchedule"}]},
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": ip},
                {"type": "Hostname", "address": name},
            ],
            "conditions": [ready_condition(ready)],
        },
    })
}

fn ready_condition(ready: bool) -> Value {
    if ready {
        json!({"type": "Ready", "status": "True", "reason": "KubeletReady"})
    } else {
        json!({"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"})
    }
}

fn ports_json(ports: &[u16]) -> Value {
    Value::Array(
        ports
            .iter()
            .enumerate()
            .map(|(i, p)| {
                json!({"name": format!("p{i}"), "port": p, "protocol": "TCP", "targetPort": 8080 + i})
            })
            .collect(),
    )
}

/// Sets the type (and class) of a Service spec, dropping what only a LoadBalancer may carry.
fn set_shape(spec: &mut Value, shape: Shape) {
    let Some(spec) = spec.as_object_mut() else {
        return;
    };
    match shape {
        Shape::Ours | Shape::Foreign => {
            spec.insert("type".into(), json!("LoadBalancer"));
            if shape == Shape::Foreign {
                spec.insert("loadBalancerClass".into(), json!(FOREIGN_CLASS));
            } else {
                spec.remove("loadBalancerClass");
            }
        }
        Shape::ClusterIp => {
            spec.insert("type".into(), json!("ClusterIP"));
            for field in [
                "loadBalancerClass",
                "externalTrafficPolicy",
                "allocateLoadBalancerNodePorts",
                "healthCheckNodePort",
            ] {
                spec.remove(field);
            }
            if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
                for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                    p.remove("nodePort");
                }
            }
        }
    }
}

/// Read-modify-write of a Service with the apiserver's validation, retried on a conflict with
/// the controllers' own writes.
fn update_service(kube: &KubeSim, name: &str, f: impl Fn(&mut Value)) -> Result<(), String> {
    for _ in 0..10 {
        let Some(mut svc) = kube.get("services", Some(NAMESPACE), name) else {
            return Err("the Service is gone".into());
        };
        f(&mut svc);
        match kube.update(svc) {
            Ok(_) => return Ok(()),
            Err(e) if e.code == 409 => continue,
            Err(e) => return Err(format!("{} {}", e.code, e.message)),
        }
    }
    Err("still conflicting after 10 attempts".into())
}

fn set_node_ready(kube: &KubeSim, name: &str, ready: bool) -> Result<(), String> {
    kube.modify("nodes", None, name, |n| {
        n["status"]["conditions"] = json!([ready_condition(ready)]);
    })
    .map(|_| ())
    .map_err(|e| format!("{} {}", e.code, e.message))
}

impl Model {
    fn live_nodes(&self, f: impl Fn(&NodeState) -> bool) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|(_, n)| n.live() && f(n))
            .map(|(k, _)| k.clone())
            .collect()
    }

    fn live_services(&self, f: impl Fn(&ServiceState) -> bool) -> Vec<String> {
        self.services
            .iter()
            .filter(|(_, s)| !s.deleted && f(s))
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Nodes to start with.
    pub(crate) fn seed_nodes(
        &mut self,
        count: usize,
        kube: &KubeSim,
        cloud: &dyn SoakCloud,
    ) -> Result<Vec<String>, String> {
        (0..count).map(|_| self.join(kube, cloud)).collect()
    }

    fn join(&mut self, kube: &KubeSim, cloud: &dyn SoakCloud) -> Result<String, String> {
        let index = self.next_node;
        self.next_node += 1;
        let name = format!("node-{index:04}");
        // The kit's numbered node, named as the workload names it (its addresses unique).
        let node = SimNode {
            name: name.clone(),
            ..SimNode::numbered(index)
        };
        let instance = cloud
            .add_instance(index, &node)
            .map_err(|e| format!("adding the instance of {name}: {e}"))?;
        kube.create(node_object(&name, index, true))
            .map_err(|e| format!("registering {name}: {} {}", e.code, e.message))?;
        self.nodes.insert(
            name.clone(),
            NodeState {
                instance: instance.clone(),
                instance_deleted: false,
                node_deleted: false,
                stopped: false,
                instance_deleted_at: None,
            },
        );
        Ok(format!("{name} joined (instance {instance})"))
    }

    /// Carries out `op` on a target the generator picks; the history line. An operation with
    /// no possible target (no node to remove, too many Services) does something that is
    /// possible instead and says so.
    pub(crate) fn apply(
        &mut self,
        op: Op,
        rng: &mut SplitMix64,
        kube: &KubeSim,
        cloud: &dyn SoakCloud,
    ) -> (Op, String) {
        let live = self.live_nodes(|_| true).len();
        let services = self.live_services(|_| true).len();
        // Keep the cluster within bounds: enough nodes to serve, not so many objects that
        // convergence at the end takes long.
        let op = match op {
            Op::NodeLeave | Op::InstanceDelete | Op::InstanceShutdown if live <= MIN_NODES => {
                Op::NodeJoin
            }
            Op::NodeJoin if live >= MAX_NODES => Op::InstanceDelete,
            Op::ServiceCreate if services >= MAX_SERVICES => Op::ServiceDelete,
            Op::PortChange
            | Op::AnnotationChange
            | Op::TypeChange
            | Op::ClassChange
            | Op::ServiceDelete
                if services == 0 =>
            {
                Op::ServiceCreate
            }
            Op::InstanceStart if self.live_nodes(|n| n.stopped).is_empty() => Op::InstanceShutdown,
            other => other,
        };
        let text = match self.apply_op(op, rng, kube, cloud) {
            Ok(text) => text,
            Err(e) => format!("refused: {e}"),
        };
        (op, text)
    }

    fn apply_op(
        &mut self,
        op: Op,
        rng: &mut SplitMix64,
        kube: &KubeSim,
        cloud: &dyn SoakCloud,
    ) -> Result<String, String> {
        match op {
            Op::NodeJoin => self.join(kube, cloud),
            Op::NodeLeave => {
                let name = self.pick_node(rng, |_| true)?;
                kube.remove("nodes", None, &name)
                    .map_err(|e| format!("deleting node {name}: {} {}", e.code, e.message))?;
                let node = self.node_mut(&name)?;
                node.node_deleted = true;
                let instance = node.instance.clone();
                node.instance_deleted = cloud.remove_instance(&instance);
                // When, as for an instance deletion: a controller that asked the cloud after
                // this and before a partition began may still be deleting the Node (a 404 now)
                // while the partition is on (PhoenixNAP, seed 7, step 3899 of a 30-minute run).
                if node.instance_deleted {
                    node.instance_deleted_at = Some(std::time::Instant::now());
                }
                Ok(format!(
                    "{name} left: Node deleted, then instance {instance}"
                ))
            }
            Op::InstanceDelete => {
                let name = self.pick_node(rng, |_| true)?;
                let node = self.node_mut(&name)?;
                let instance = node.instance.clone();
                node.instance_deleted = cloud.remove_instance(&instance);
                node.instance_deleted_at = Some(std::time::Instant::now());
                set_node_ready(kube, &name, false)?;
                Ok(format!(
                    "instance {instance} of {name} deleted; Node NotReady"
                ))
            }
            Op::InstanceShutdown => {
                let name = self.pick_node(rng, |n| !n.stopped)?;
                let node = self.node_mut(&name)?;
                node.stopped = true;
                let instance = node.instance.clone();
                cloud.set_running(&instance, false);
                set_node_ready(kube, &name, false)?;
                Ok(format!(
                    "instance {instance} of {name} shut down; Node NotReady"
                ))
            }
            Op::InstanceStart => {
                let name = self.pick_node(rng, |n| n.stopped)?;
                let node = self.node_mut(&name)?;
                node.stopped = false;
                let instance = node.instance.clone();
                cloud.set_running(&instance, true);
                set_node_ready(kube, &name, true)?;
                Ok(format!("instance {instance} of {name} started; Node Ready"))
            }
            Op::ServiceCreate => {
                let shape = match rng.below(10) {
                    0 | 1 => Shape::Foreign,
                    2 => Shape::ClusterIp,
                    _ => Shape::Ours,
                };
                let ports: Vec<u16> = if rng.chance(30) {
                    vec![80, 443]
                } else {
                    vec![80]
                };
                self.create_service(kube, shape, ports)
            }
            Op::PortChange => {
                let name = self.pick_service(rng, |_| true)?;
                let mut ports = self.service(&name)?.ports.clone();
                match rng.below(3) {
                    0 if ports.len() > 1 => {
                        ports.pop();
                    }
                    1 if ports.len() < 3 => ports.push(8000 + ports.len() as u16),
                    _ => {
                        if let Some(first) = ports.first_mut() {
                            *first = 80 + rng.below(20) as u16;
                        }
                    }
                }
                let value = ports_json(&ports);
                update_service(kube, &name, |svc| {
                    // Keep the node ports the apiserver allocated for ports that stay.
                    let old = svc["spec"]["ports"].clone();
                    let mut new = value.clone();
                    if let (Some(new), Some(old)) = (new.as_array_mut(), old.as_array()) {
                        for (n, o) in new.iter_mut().zip(old) {
                            if let Some(np) = o.get("nodePort") {
                                n["nodePort"] = np.clone();
                            }
                        }
                    }
                    svc["spec"]["ports"] = new;
                })?;
                self.service_mut(&name)?.ports = ports.clone();
                Ok(format!("{name} ports now {ports:?}"))
            }
            Op::AnnotationChange => {
                let name = self.pick_service(rng, |_| true)?;
                let (key, value) = cloud
                    .annotation(rng)
                    .ok_or("this driver has no annotation to change")?;
                kube.modify("services", Some(NAMESPACE), &name, |svc| {
                    svc["metadata"]["annotations"][&key] = json!(value);
                })
                .map_err(|e| format!("annotating {name}: {} {}", e.code, e.message))?;
                Ok(format!("{name} annotated {key}={value}"))
            }
            Op::TypeChange => {
                let name = self.pick_service(rng, |_| true)?;
                let shape = match self.service(&name)?.shape {
                    Shape::ClusterIp => Shape::Ours,
                    Shape::Ours | Shape::Foreign => Shape::ClusterIp,
                };
                update_service(kube, &name, |svc| set_shape(&mut svc["spec"], shape))?;
                let svc = self.service_mut(&name)?;
                svc.shape = shape;
                svc.ever_ours |= shape == Shape::Ours;
                Ok(format!("{name} type changed: now {shape:?}"))
            }
            Op::ClassChange => {
                let name = self.pick_service(rng, |s| s.shape != Shape::ClusterIp)?;
                let to = match self.service(&name)?.shape {
                    Shape::Foreign => Shape::Ours,
                    _ => Shape::Foreign,
                };
                update_service(kube, &name, |svc| {
                    set_shape(&mut svc["spec"], Shape::ClusterIp)
                })?;
                update_service(kube, &name, |svc| set_shape(&mut svc["spec"], to))?;
                let svc = self.service_mut(&name)?;
                svc.shape = to;
                svc.ever_ours |= to == Shape::Ours;
                Ok(format!(
                    "{name} class changed (through ClusterIP): now {to:?}"
                ))
            }
            Op::NodeExclude => {
                let name = self.pick_node(rng, |_| true)?;
                let node = kube
                    .get("nodes", None, &name)
                    .ok_or_else(|| format!("Node {name} is gone"))?;
                let labelled = node["metadata"]["labels"][EXCLUDE_LB_LABEL].is_string();
                // Keep a node without the label, so load balancers keep a member.
                let unlabelled = self
                    .live_nodes(|_| true)
                    .iter()
                    .filter_map(|n| kube.get("nodes", None, n))
                    .filter(|n| !n["metadata"]["labels"][EXCLUDE_LB_LABEL].is_string())
                    .count();
                let value = if labelled || unlabelled < 2 {
                    None
                } else {
                    rng.pick(EXCLUDE_VALUES).map(|v| v.to_string())
                };
                kube.modify("nodes", None, &name, |n| {
                    if !n["metadata"]["labels"].is_object() {
                        n["metadata"]["labels"] = json!({});
                    }
                    if let Some(labels) = n["metadata"]["labels"].as_object_mut() {
                        match &value {
                            Some(v) => {
                                labels.insert(EXCLUDE_LB_LABEL.into(), json!(v));
                            }
                            None => {
                                labels.remove(EXCLUDE_LB_LABEL);
                            }
                        }
                    }
                })
                .map_err(|e| format!("labelling {name}: {} {}", e.code, e.message))?;
                Ok(match value {
                    Some(v) => format!("{name} labelled {EXCLUDE_LB_LABEL}={v:?}"),
                    None if labelled => format!("{name}: label {EXCLUDE_LB_LABEL} removed"),
                    None => format!(
                        "{name} stays without {EXCLUDE_LB_LABEL} (the last node without it)"
                    ),
                })
            }
            Op::ServiceDelete => {
                let name = self.pick_service(rng, |_| true)?;
                kube.remove("services", Some(NAMESPACE), &name)
                    .map_err(|e| format!("deleting {name}: {} {}", e.code, e.message))?;
                self.service_mut(&name)?.deleted = true;
                Ok(format!("{name} deleted"))
            }
        }
    }

    /// Creates a Service of `shape` with `ports`; the history line.
    fn create_service(
        &mut self,
        kube: &KubeSim,
        shape: Shape,
        ports: Vec<u16>,
    ) -> Result<String, String> {
        let index = self.next_service;
        self.next_service += 1;
        let name = format!("svc-{index:04}");
        let mut spec = json!({"selector": {"app": name}, "ports": ports_json(&ports)});
        set_shape(&mut spec, shape);
        let created = kube
            .create(json!({
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": name, "namespace": NAMESPACE},
                "spec": spec,
            }))
            .map_err(|e| format!("creating {name}: {} {}", e.code, e.message))?;
        let uid = created["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        self.services.insert(
            name.clone(),
            ServiceState {
                shape,
                ever_ours: shape == Shape::Ours,
                deleted: false,
                ports: ports.clone(),
                uid: uid.clone(),
            },
        );
        Ok(format!(
            "{name} created ({shape:?}, ports {ports:?}, uid {uid})"
        ))
    }

    /// At quiescence: a LoadBalancer Service of the CCM's class, created if none is left, so the
    /// load balancer members invariant has one to check. The history line when one was created.
    pub(crate) fn ensure_ours(&mut self, kube: &KubeSim) -> Option<String> {
        if !self.live_services(|s| s.shape == Shape::Ours).is_empty() {
            return None;
        }
        Some(
            match self.create_service(kube, Shape::Ours, vec![80, 443]) {
                Ok(text) => text,
                Err(e) => format!("refused: {e}"),
            },
        )
    }

    /// What an operator does about a known dead end (see `--strict`): a Node whose instance was
    /// deleted before the controllers initialised it has no provider ID, so the cloudscale and
    /// PhoenixNAP drivers, as their upstream CCMs, do not decide that its instance is gone (they
    /// decide existence by provider ID only) and the Node is never deleted. Load balancers go on
    /// without it (cloudscale leaves the node out with a `BackendsLeftOut` Warning, PhoenixNAP's
    /// update warns with `BackendsUninitialized`; upstream fails them), but the Node stays until
    /// the operator deletes it by hand, as this does. Returns one line per Node deleted.
    pub(crate) fn remove_orphaned_nodes(&mut self, kube: &KubeSim) -> Vec<String> {
        let mut lines = Vec::new();
        for (name, node) in &mut self.nodes {
            // A grace period: a driver that can find the instance by name deletes the Node
            // itself, and the operator must not take that from it.
            let orphaned_long = node
                .instance_deleted_at
                .is_some_and(|at| at.elapsed() >= ORPHAN_GRACE);
            if !node.instance_deleted || node.node_deleted || !orphaned_long {
                continue;
            }
            let Some(obj) = kube.get("nodes", None, name) else {
                continue;
            };
            if obj["spec"]["providerID"].is_string() {
                continue;
            }
            match kube.remove("nodes", None, name) {
                Ok(_) => {
                    node.node_deleted = true;
                    lines.push(format!(
                        "operator deleted Node {name}: its instance {} was deleted before it was initialised (known issue: no provider ID, so no controller can delete it)",
                        node.instance
                    ));
                }
                Err(e) => lines.push(format!(
                    "operator could not delete orphaned Node {name}: {} {}",
                    e.code, e.message
                )),
            }
        }
        lines
    }

    fn pick_node(
        &self,
        rng: &mut SplitMix64,
        f: impl Fn(&NodeState) -> bool,
    ) -> Result<String, String> {
        rng.pick(&self.live_nodes(f))
            .cloned()
            .ok_or_else(|| "no node to pick".to_string())
    }

    fn pick_service(
        &self,
        rng: &mut SplitMix64,
        f: impl Fn(&ServiceState) -> bool,
    ) -> Result<String, String> {
        rng.pick(&self.live_services(f))
            .cloned()
            .ok_or_else(|| "no Service to pick".to_string())
    }

    fn node_mut(&mut self, name: &str) -> Result<&mut NodeState, String> {
        self.nodes
            .get_mut(name)
            .ok_or_else(|| format!("node {name} is not in the model"))
    }

    fn service(&self, name: &str) -> Result<&ServiceState, String> {
        self.services
            .get(name)
            .ok_or_else(|| format!("Service {name} is not in the model"))
    }

    fn service_mut(&mut self, name: &str) -> Result<&mut ServiceState, String> {
        self.services
            .get_mut(name)
            .ok_or_else(|| format!("Service {name} is not in the model"))
    }
}
