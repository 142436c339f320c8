//! Which Kubernetes client each controller talks through ([`ControllerClients`]): the
//! process's own, or with `--use-service-account-credentials` the client of the controller's
//! own ServiceAccount, as upstream's `ControllerClientBuilder.ClientOrDie(name)` gives each
//! controller (k8s.io/cloud-provider app/controllermanager.go, `DefaultInitFuncConstructors`).
//! The informers, leader election and the serving port's reviews always use the process's own
//! client (upstream's `rootClientBuilder.ClientOrDie("shared-informers")`).
//!
//! A leaf: it names no controller module, only their reporter names as strings, and a test
//! holds that table to the registry.

use std::collections::HashMap;

use kube::Client;

/// Each controller's account, as upstream names the client it asks for: (canonical controller
/// name, the reporter name its writes and events carry, the ServiceAccount). The two node
/// controllers share `node-controller` "for historical reasons", as upstream's do.
pub const CONTROLLER_ACCOUNTS: &[(&str, &str, &str)] = &[
    (
        "cloud-node-controller",
        "cloud-node-controller",
        "node-controller",
    ),
    (
        "cloud-node-lifecycle-controller",
        "cloud-node-lifecycle-controller",
        "node-controller",
    ),
    (
        "service-lb-controller",
        "service-controller",
        "service-controller",
    ),
    (
        "node-route-controller",
        "route_controller",
        "route-controller",
    ),
];

/// The ServiceAccount of the controller named `controller` (canonical name or reporter name).
pub fn account_of(controller: &str) -> Option<&'static str> {
    CONTROLLER_ACCOUNTS
        .iter()
        .find(|(name, reporter, _)| *name == controller || *reporter == controller)
        .map(|(_, _, account)| *account)
}

/// The clients the controllers write and read through.
#[derive(Clone)]
pub struct ControllerClients {
    root: Client,
    /// By ServiceAccount name; empty without `--use-service-account-credentials`.
    accounts: HashMap<&'static str, Client>,
}

impl From<Client> for ControllerClients {
    /// Every controller on the process's own client (the flag off).
    fn from(root: Client) -> Self {
        ControllerClients {
            root,
            accounts: HashMap::new(),
        }
    }
}

impl ControllerClients {
    /// The process's client for the informers and `accounts` (ServiceAccount name → client)
    /// for the controllers.
    pub fn with_accounts(root: Client, accounts: HashMap<&'static str, Client>) -> Self {
        ControllerClients { root, accounts }
    }

    /// The process's own client (informers, the shadow's announcements).
    pub fn root(&self) -> &Client {
        &self.root
    }

    /// Whether the controllers use their own accounts.
    pub fn per_controller(&self) -> bool {
        !self.accounts.is_empty()
    }

    /// The client of the controller whose reporter (or canonical) name is `controller`: its
    /// account's with per-controller credentials, else the process's. A controller without an
    /// account built for it with per-controller credentials on is a programming error (the
    /// manager builds one for every enabled controller); it gets the process's client and a
    /// log line rather than a panic in production.
    pub fn for_controller(&self, controller: &str) -> Client {
        if self.accounts.is_empty() {
            return self.root.clone();
        }
        match account_of(controller).and_then(|a| self.accounts.get(a)) {
            Some(client) => client.clone(),
            None => {
                debug_assert!(false, "no ServiceAccount client for {controller}");
                tracing::error!(
                    controller,
                    "no ServiceAccount client was built for this controller; it uses the process's own credentials"
                );
                self.root.clone()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::CONTROLLERS;

    #[test]
    fn every_controller_and_reporter_has_upstreams_account() {
        for entry in CONTROLLERS {
            assert!(
                account_of(entry.name).is_some(),
                "{} has no account",
                entry.name
            );
        }
        for reporter in [
            crate::controllers::node::REPORTER,
            crate::controllers::lifecycle::REPORTER,
            crate::controllers::service::REPORTER,
            crate::controllers::route::REPORTER,
        ] {
            assert!(account_of(reporter).is_some(), "{reporter} has no account");
        }
        assert_eq!(account_of("cloud-node"), None, "aliases are not names here");
        assert_eq!(account_of("route_controller"), Some("route-controller"));
        assert_eq!(
            account_of("cloud-node-lifecycle-controller"),
            Some("node-controller")
        );
    }
}
