//! What is checked of `run`'s flags before anything is loaded (the files they name, the
//! controllers' settings, the lease, the flags accepted without effect), and the settings
//! made of them.

use anyhow::bail;
use wasm_ccm_controllers::ShadowOptions;
use wasm_ccm_controllers::{ControllerConfig, EnabledControllers};
use wasm_ccm_manager::LeaderConfig;

#[cfg(test)]
use super::args::parse_cache_ttl;
use super::args::{RunArgs, SHADOW_LEASE, UPSTREAM_LEASE};
use super::feature_gates::FeatureGates;
use crate::GlobalArgs;
use crate::driver_set::{DriverLoad, DriverSet, LimitDefaults};
use crate::source::DriverSource;

impl RunArgs {
    /// The drivers to run: the `--drivers-config` file's, or the one-driver flags as a set of
    /// one ([`DriverSet::from_flags`]). Nothing is read but the file.
    pub(super) fn driver_set(&self) -> anyhow::Result<DriverSet> {
        if let Some(path) = &self.drivers_config {
            let set = crate::driver_set::read(
                path,
                LimitDefaults {
                    call_timeout: self.call_timeout,
                    init_timeout: self.init_timeout,
                    memory_limit: self.memory_limit,
                    cloud_requests: self.cloud_request_limit(),
                },
            )?;
            if set.routing.drivers().iter().any(|d| d.routes) && !self.configure_cloud_routes {
                bail!(
                    "--drivers-config gives a driver `routes: true` but --configure-cloud-routes=false; drop the role or the flag"
                );
            }
            return Ok(set);
        }
        let Some(provider) = self.cloud_provider.clone().filter(|p| !p.is_empty()) else {
            bail!(
                "--cloud-provider is required: the name of the cloud provider, which must match the driver's name"
            );
        };
        let Some(driver_flag) = self.driver.as_deref() else {
            bail!("--driver is required (or --drivers-config for several drivers)");
        };
        let load = DriverLoad {
            name: provider.clone(),
            source: DriverSource::parse(driver_flag)?,
            sha256: self.driver_sha256.clone(),
            cloud_config: self.cloud_config.clone(),
            allow_egress: self.allow_egress.clone(),
            call_timeout: self.call_timeout,
            init_timeout: self.init_timeout,
            memory_limit: self.memory_limit,
            cloud_requests: self.cloud_request_limit(),
        };
        Ok(DriverSet::from_flags(&provider, load))
    }

    /// The operator's credential options for every driver.
    pub(super) fn secret_options(&self) -> wasm_ccm_runtime::secrets::SecretOptions {
        wasm_ccm_runtime::secrets::SecretOptions {
            origins: self.secret_origins.clone(),
            allow_plain_http: self.allow_plain_http_secrets,
        }
    }

    /// Checks every flag that names a file, a directory or a URL before any work is done.
    /// The one-driver flags' driver is checked here, under the flags' names; a DriverSet
    /// file's drivers by [`DriverSet::preflight`].
    pub(super) fn preflight(&self, global: &GlobalArgs, set: &DriverSet) -> anyhow::Result<()> {
        use crate::preflight::{PathFlag, directory, master_url, readable_files, tls_pair};
        let source = set.is_flags().then(|| &set.drivers[0].source);
        let driver_file = match source {
            Some(DriverSource::File(path)) => Some(path.as_path()),
            _ => None,
        };
        let kubeconfig_hint = "give the path of a kubeconfig file, or leave the flag out";
        readable_files(&[
            PathFlag {
                flag: "--kubeconfig",
                path: self.kubeconfig.as_deref(),
                what: "a kubeconfig",
                hint: "give the path of a kubeconfig file, or leave --kubeconfig out to use the in-cluster configuration",
            },
            PathFlag {
                flag: "--driver",
                path: driver_file,
                what: "the driver's .wasm",
                hint: "give the path of the driver component (a mounted ConfigMap key) or an oci:// reference",
            },
            PathFlag {
                flag: "--cloud-config",
                path: self.cloud_config.as_deref(),
                what: "the driver's configuration",
                hint: "give the path of the cloud config file (the mounted Secret's key), or leave the flag out",
            },
            PathFlag {
                flag: "--tls-cert-file",
                path: self.tls_cert_file.as_deref(),
                what: "a PEM certificate",
                hint: "give the serving certificate's PEM file, or leave the flag out to use --cert-dir",
            },
            PathFlag {
                flag: "--tls-private-key-file",
                path: self.tls_private_key_file.as_deref(),
                what: "a PEM private key",
                hint: "give the serving key's PEM file, or leave the flag out to use --cert-dir",
            },
            PathFlag {
                flag: "--authentication-kubeconfig",
                path: self.authentication_kubeconfig.as_deref(),
                what: "a kubeconfig",
                hint: kubeconfig_hint,
            },
            PathFlag {
                flag: "--authorization-kubeconfig",
                path: self.authorization_kubeconfig.as_deref(),
                what: "a kubeconfig",
                hint: kubeconfig_hint,
            },
        ])?;
        if let Some(source) = source {
            self.verify.preflight(source)?;
        }
        // Only when it exists: the Deployment mounts an optional Secret (absent: anonymous).
        readable_files(&[PathFlag {
            flag: "--registry-config",
            path: self.registry.existing_config(),
            what: "a dockerconfigjson file",
            hint: "give the mounted imagePullSecret's .dockerconfigjson file, or leave the flag out for anonymous pulls",
        }])?;
        tls_pair(
            self.tls_cert_file.as_deref(),
            self.tls_private_key_file.as_deref(),
        )?;
        directory(
            "--cert-dir",
            self.cert_dir.as_deref(),
            "the serving certificate",
        )?;
        directory(
            "--cache-dir",
            global.cache_dir.as_deref(),
            "compiled drivers",
        )?;
        master_url(self.master.as_deref())
    }

    /// `--controllers`: which loops run (checked right after [`Self::controller_config`]).
    pub(super) fn enabled_controllers(&self) -> anyhow::Result<EnabledControllers> {
        EnabledControllers::parse(&self.controllers).map_err(anyhow::Error::msg)
    }

    pub(super) fn controller_config(&self) -> anyhow::Result<ControllerConfig> {
        if self.shadow_events && !self.shadow {
            bail!("--shadow-events only applies with --shadow; add --shadow or drop the flag");
        }
        if self.shadow_validate != "none" && !self.shadow {
            bail!(
                "--shadow-validate={} only applies with --shadow; add --shadow or drop the flag",
                self.shadow_validate
            );
        }
        if self.concurrent_node_syncs == 0 {
            bail!("--concurrent-node-syncs must be greater than 0");
        }
        Ok(ControllerConfig {
            cluster_name: self.cluster_name.clone(),
            concurrent_node_syncs: self.concurrent_node_syncs,
            concurrent_node_status_updates: self.concurrent_node_status_updates,
            concurrent_service_syncs: self.concurrent_service_syncs.max(1),
            node_monitor_period: self.node_monitor_period,
            node_status_update_frequency: self.node_status_update_frequency,
            route_reconciliation_period: self.route_reconciliation_period,
            watch_based_routes: self.gates().watch_based_routes(),
            min_resync_period: self.min_resync_period,
            instance_listing_max_age: self.instance_listing_max_age,
            housekeeping_period: self.housekeeping_period,
            configure_cloud_routes: self.configure_cloud_routes,
            cluster_cidr: self.cluster_cidr.clone(),
            kube_api_qps: self.kube_api_qps,
            kube_api_burst: self.kube_api_burst,
            shadow: self.shadow.then(|| ShadowOptions {
                grace: self.shadow_grace,
                validate_on_server: self.shadow_validate == "server",
                events: self.shadow_events,
            }),
        })
    }

    /// Leader election's settings (`None` with --leader-elect=false).
    pub(super) fn leader(&self, identity: &str, lease_name: String) -> Option<LeaderConfig> {
        self.leader_elect.then(|| LeaderConfig {
            namespace: self.leader_elect_resource_namespace.clone(),
            name: lease_name,
            identity: identity.to_string(),
            lease_duration: self.leader_elect_lease_duration,
            renew_deadline: self.leader_elect_renew_deadline,
            retry_period: self.leader_elect_retry_period,
        })
    }

    /// The Lease's name; a shadow gets its own, so it never competes with the CCM in charge.
    pub(super) fn lease_name(&self) -> anyhow::Result<String> {
        match (&self.leader_elect_resource_name, self.shadow) {
            (Some(name), true) if name == UPSTREAM_LEASE => bail!(
                "--shadow with --leader-elect-resource-name={UPSTREAM_LEASE}: a shadow must never hold the lease of the CCM in charge; drop the flag (a shadow uses {SHADOW_LEASE:?}) or name another lease"
            ),
            (Some(name), _) => Ok(name.clone()),
            (None, true) => Ok(SHADOW_LEASE.to_string()),
            (None, false) => Ok(UPSTREAM_LEASE.to_string()),
        }
    }

    /// Every `--feature-gates` flag, merged.
    fn gates(&self) -> FeatureGates {
        FeatureGates::merge(&self.feature_gates)
    }

    pub(super) fn warn_about_ignored_flags(&self) {
        let without_effect = self.gates().without_effect();
        if !without_effect.is_empty() {
            tracing::warn!(
                gates = %without_effect.join(","),
                "--feature-gates: these gates of upstream's CCM have no effect in wasm-ccm (docs/PARITY.md, \"Feature gates\", says why for each); only CloudControllerManagerWatchBasedRoutesReconciliation does"
            );
        }
        for (given, flag) in [
            (
                self.allow_untagged_cloud.is_some(),
                "--allow-untagged-cloud",
            ),
            (self.node_sync_period.is_some(), "--node-sync-period"),
            (
                self.external_cloud_volume_plugin.is_some(),
                "--external-cloud-volume-plugin",
            ),
        ] {
            if given {
                tracing::warn!("{flag} is deprecated upstream and has no effect");
            }
        }
        for (given, flag) in [
            (self.verbosity.is_some(), "--v (use --log)"),
            (
                self.controller_start_interval.is_some(),
                "--controller-start-interval",
            ),
            (
                self.enable_leader_migration.is_some(),
                "--enable-leader-migration (no kube-controller-manager of Kubernetes 1.31 or later runs cloud controllers to migrate from; the Lease kube-system/cloud-controller-manager, shared with upstream's CCMs, keeps one leader: README, \"Leader migration\")",
            ),
            (
                self.leader_migration_config.is_some(),
                "--leader-migration-config (see --enable-leader-migration)",
            ),
            (
                self.tls_cipher_suites.is_some(),
                "--tls-cipher-suites (rustls's safe defaults are used)",
            ),
            (
                self.client_ca_file.is_some(),
                "--client-ca-file (client certificates are not authenticated)",
            ),
            (
                self.requestheader_client_ca_file.is_some(),
                "--requestheader-client-ca-file (request-header authentication is not supported)",
            ),
            (
                self.requestheader_allowed_names.is_some(),
                "--requestheader-allowed-names",
            ),
            (
                self.requestheader_extra_headers_prefix.is_some(),
                "--requestheader-extra-headers-prefix",
            ),
            (
                self.requestheader_group_headers.is_some(),
                "--requestheader-group-headers",
            ),
            (
                self.requestheader_username_headers.is_some(),
                "--requestheader-username-headers",
            ),
            (
                self.authentication_skip_lookup.is_some(),
                "--authentication-skip-lookup (extension-apiserver-authentication is never read)",
            ),
            (
                self.authentication_tolerate_lookup_failure.is_some(),
                "--authentication-tolerate-lookup-failure",
            ),
        ] {
            if given {
                tracing::warn!(
                    "{flag} is accepted for compatibility but has no effect in wasm-ccm"
                );
            }
        }
        if self.use_service_account_credentials && self.shadow {
            tracing::warn!(
                "--use-service-account-credentials is ignored with --shadow: a shadow writes nothing and reads as its own account"
            );
        }
        if self.allocate_node_cidrs {
            tracing::warn!(
                "--allocate-node-cidrs has no effect in a cloud-controller-manager (node IPAM is the kube-controller-manager's)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use std::time::Duration;

    /// `wasm-ccm run`'s flags alone, parsed as the binary parses them.
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    /// The controllers' settings from `run` with `flags` (and a driver, which is required).
    fn config(flags: &[&str]) -> ControllerConfig {
        run_args(flags)
            .controller_config()
            .expect("a valid configuration")
    }

    #[test]
    fn node_status_update_workers_fall_back_to_node_syncs() {
        // (flags, --concurrent-node-syncs, periodic address update workers)
        let cases: &[(&[&str], usize, usize)] = &[
            (&[], 1, 1),
            (&["--concurrent-node-syncs=4"], 4, 4),
            (
                &[
                    "--concurrent-node-syncs=4",
                    "--concurrent-node-status-updates=9",
                ],
                4,
                9,
            ),
            (&["--concurrent-node-status-updates=2"], 1, 2),
            // Upstream: 0 means unspecified.
            (
                &[
                    "--concurrent-node-syncs=3",
                    "--concurrent-node-status-updates=0",
                ],
                3,
                3,
            ),
        ];
        for (flags, syncs, status) in cases {
            let c = config(flags);
            assert_eq!(c.concurrent_node_syncs, *syncs, "{flags:?}");
            assert_eq!(c.address_workers(), *status, "{flags:?}");
        }
        assert!(
            Cli::try_parse_from([
                "wasm-ccm",
                "--driver=d",
                "--concurrent-node-status-updates=-1"
            ])
            .is_err(),
            "a negative count is refused, as upstream"
        );
    }

    /// `run` with `flags` (and a driver, which is required), parsed as the binary parses them.
    fn run_args(flags: &[&str]) -> RunArgs {
        let args = ["wasm-ccm", "--driver", "d.wasm"].iter().chain(flags);
        Cli::try_parse_from(args).expect("flags parse").run
    }

    /// The flags whose values the lifecycle and service controllers, the write seam and the
    /// elector use reach their settings: upstream's defaults without them, the given values
    /// with them (the tests beside those users check the effect of the settings).
    #[test]
    fn timing_and_concurrency_flags_reach_the_settings_that_use_them() {
        let s = Duration::from_secs;
        let leader = |flags: &[&str]| {
            run_args(flags)
                .leader("me", UPSTREAM_LEASE.to_string())
                .expect("--leader-elect is on by default")
        };
        let default = config(&[]);
        assert_eq!(default.node_monitor_period, s(5));
        assert_eq!(default.concurrent_service_syncs, 1);
        assert_eq!((default.kube_api_qps, default.kube_api_burst), (20.0, 30));
        assert_eq!(leader(&[]).retry_period, s(2));
        let given = config(&[
            "--node-monitor-period=7s",
            "--concurrent-service-syncs=4",
            "--kube-api-qps=4.5",
            "--kube-api-burst=3",
        ]);
        assert_eq!(given.node_monitor_period, s(7));
        assert_eq!(given.concurrent_service_syncs, 4);
        assert_eq!((given.kube_api_qps, given.kube_api_burst), (4.5, 3));
        assert_eq!(
            leader(&["--leader-elect-retry-period=300ms"]).retry_period,
            Duration::from_millis(300)
        );
        // Upstream starts no Service worker for 0; ours runs one (docs/PARITY.md).
        let zero = config(&["--concurrent-service-syncs=0"]);
        assert_eq!(zero.concurrent_service_syncs, 1);
        // The instance listing is off unless asked for.
        assert_eq!(default.instance_listing_max_age, Duration::ZERO);
        let listing = config(&["--instance-listing-max-age=30s"]);
        assert_eq!(listing.instance_listing_max_age, s(30));
    }

    #[test]
    fn cache_ttls_may_be_zero() {
        assert_eq!(parse_cache_ttl("0"), Ok(Duration::ZERO));
        assert_eq!(parse_cache_ttl("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_cache_ttl("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_cache_ttl("1m30s"), Ok(Duration::from_secs(90)));
        assert!(parse_cache_ttl("-1s").is_err());
        assert!(parse_cache_ttl("soon").is_err());
    }
}
