//! The CCM's identity under RBAC, shared by the tests that run `wasm-ccm run` as the
//! ServiceAccount deploy/base binds: its RBAC objects, a simulator that knows its token, and a
//! kubeconfig that authenticates with it.

use std::path::Path;

use serde_json::Value;
use wasm_ccm_sim::kube::{KubeSim, load_seed_file};

use super::localhost;

/// The user of deploy/base's ServiceAccount, as the apiserver names it.
pub(crate) const SA_USER: &str = "system:serviceaccount:kube-system:cloud-controller-manager";
/// The bearer token the tests give that ServiceAccount.
pub(crate) const SA_TOKEN: &str = "ccm-sa-token";
/// The groups the apiserver puts a kube-system ServiceAccount in.
pub(crate) const SA_GROUPS: &[&str] = &[
    "system:serviceaccounts",
    "system:serviceaccounts:kube-system",
];

/// deploy/base/rbac.yaml, after checking that its bindings name deploy/base's ServiceAccount.
pub(crate) fn deploy_rbac() -> Vec<Value> {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/base");
    let objects = load_seed_file(&base.join("rbac.yaml")).expect("deploy/base/rbac.yaml");
    let sa = load_seed_file(&base.join("serviceaccount.yaml")).expect("serviceaccount.yaml");
    let sa = &sa[0];
    assert_eq!(sa["kind"], "ServiceAccount");
    let account = format!(
        "system:serviceaccount:{}:{}",
        sa["metadata"]["namespace"].as_str().expect("namespace"),
        sa["metadata"]["name"].as_str().expect("name")
    );
    assert_eq!(account, SA_USER, "the ServiceAccount of deploy/base");
    objects
}

/// A simulator with RBAC on, `objects` loaded, the CCM's token and the `others` (token, user,
/// groups) registered.
pub(crate) async fn rbac_sim(objects: Vec<Value>, others: &[(&str, &str, &[&str])]) -> KubeSim {
    let sim = KubeSim::start(localhost()).await.expect("sim");
    sim.enable_rbac();
    sim.add_token(SA_TOKEN, SA_USER, SA_GROUPS);
    for (token, user, groups) in others {
        sim.add_token(token, user, groups);
    }
    sim.load_rbac(objects).expect("load RBAC");
    sim
}

/// Writes a kubeconfig for `sim` that authenticates as the CCM's ServiceAccount into `dir` and
/// returns its path.
pub(crate) fn service_account_kubeconfig(sim: &KubeSim, dir: &Path) -> String {
    let path = dir.join("kubeconfig");
    let text = sim
        .kubeconfig()
        .replace("token: sim\n", &format!("token: {SA_TOKEN}\n"));
    assert!(
        text.contains(SA_TOKEN),
        "the simulator's kubeconfig carries its token"
    );
    std::fs::write(&path, text).expect("kubeconfig");
    path.display().to_string()
}

/// deploy/base/rbac-controllers.yaml: the controllers' own accounts of
/// --use-service-account-credentials and the CCM's right to their tokens.
pub(crate) fn controller_rbac() -> Vec<Value> {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/base");
    load_seed_file(&base.join("rbac-controllers.yaml")).expect("deploy/base/rbac-controllers.yaml")
}
