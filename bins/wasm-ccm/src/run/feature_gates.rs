//! `--feature-gates`: upstream's `key=bool,…` list, parsed as `k8s.io/component-base`'s
//! `featuregate.Set` does (v0.36.2 `featuregate/feature_gate.go`), over the gates upstream's CCM
//! registers. One gate has an effect here (the watch-based route controller, KEP-5237); the
//! others are accepted with a warning, and a name upstream does not know is refused, as upstream
//! refuses it.

use std::collections::BTreeMap;

/// KEP-5237: the route controller reconciles on node changes instead of every period.
pub(super) const WATCH_BASED_ROUTES: &str = "CloudControllerManagerWatchBasedRoutesReconciliation";

/// Upstream's special keys: every alpha (beta) gate not named explicitly takes their value.
const ALL_ALPHA: &str = "AllAlpha";
const ALL_BETA: &str = "AllBeta";

/// Every gate upstream's CCM accepts at v0.36.2, besides [`WATCH_BASED_ROUTES`]. None changes
/// what wasm-ccm does (docs/PARITY.md, "Feature gates", says why for each).
/// Sources, all at v0.36.2: `k8s.io/controller-manager` `pkg/features/kube_features.go`;
/// `k8s.io/component-base` `logs/api/v1/kube_features.go` and `metrics/features/kube_features.go`;
/// `k8s.io/apiserver` `pkg/features/kube_features.go` (registered on the same gate by its `init`).
const WITHOUT_EFFECT: &[&str] = &[
    // controller-manager
    "CloudControllerManagerWebhook",
    "ControllerManagerReleaseLeaderElectionLockOnExit",
    // component-base
    "ContextualLogging",
    "LoggingAlphaOptions",
    "LoggingBetaOptions",
    "LoggingStableOptions",
    "NativeHistograms",
    // apiserver
    "APIResponseCompression",
    "APIServerIdentity",
    "APIServerTracing",
    "APIServingWithRoutine",
    "AggregatedDiscoveryRemoveBetaType",
    "AllowParsingUserUIDFromCertAuth",
    "AllowUnsafeMalformedObjectDeletion",
    "AnonymousAuthConfigurableEndpoints",
    "AuthorizeWithSelectors",
    "BtreeWatchCache",
    "CBORServingAndStorage",
    "ConcurrentWatchObjectDecode",
    "ConsistentListFromCache",
    "ConstrainedImpersonation",
    "CoordinatedLeaderElection",
    "DeclarativeValidation",
    "DeclarativeValidationBeta",
    "DeclarativeValidationTakeover",
    "DetectCacheInconsistency",
    "KMSv1",
    "ListFromCacheSnapshot",
    "ManifestBasedAdmissionControlConfig",
    "MutatingAdmissionPolicy",
    "OpenAPIEnums",
    "RemoteRequestHeaderUID",
    "ResilientWatchCacheInitialization",
    "RetryGenerateName",
    "SeparateCacheWatchRPC",
    "ShardedListAndWatch",
    "SizeBasedListCostEstimate",
    "StorageVersionAPI",
    "StorageVersionHash",
    "StreamingCollectionEncodingToJSON",
    "StreamingCollectionEncodingToProtobuf",
    "StructuredAuthenticationConfiguration",
    "StructuredAuthenticationConfigurationEgressSelector",
    "StructuredAuthenticationConfigurationJWKSMetrics",
    "TokenRequestServiceAccountUIDValidation",
    "UnauthenticatedHTTP2DOSMitigation",
    "UnknownVersionInteroperabilityProxy",
    "WatchCacheInitializationPostStartHook",
    "WatchList",
];

/// One `--feature-gates` value: the gates it names, in order (a later one wins, as in upstream's
/// map).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct GateSettings(BTreeMap<String, bool>);

/// Parses one `--feature-gates` value (clap's value parser). Messages are upstream's, with what
/// to do added.
pub(super) fn parse_feature_gates(value: &str) -> Result<GateSettings, String> {
    let mut gates = BTreeMap::new();
    for pair in value.split(',').filter(|p| !p.is_empty()) {
        let (key, setting) = match pair.split_once('=') {
            Some((k, v)) => (k.trim(), v.trim()),
            None => {
                return Err(format!(
                    "missing bool value for {}: write NAME=true or NAME=false",
                    pair.trim()
                ));
            }
        };
        let on = parse_go_bool(setting).ok_or_else(|| {
            format!("invalid value of {key}={setting}: write true or false (Go's strconv.ParseBool forms: 1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False)")
        })?;
        if !known(key) {
            return Err(format!(
                "unrecognized feature gate: {key}; upstream's cloud-controller-manager knows {WATCH_BASED_ROUTES}, {ALL_ALPHA}, {ALL_BETA} and the gates listed in docs/PARITY.md"
            ));
        }
        gates.insert(key.to_string(), on);
    }
    Ok(GateSettings(gates))
}

/// `strconv.ParseBool`'s accepted spellings.
fn parse_go_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

fn known(key: &str) -> bool {
    key == WATCH_BASED_ROUTES
        || key == ALL_ALPHA
        || key == ALL_BETA
        || WITHOUT_EFFECT.contains(&key)
}

/// Every `--feature-gates` flag merged (upstream merges each occurrence into the same gate).
#[derive(Debug, Default)]
pub(super) struct FeatureGates(BTreeMap<String, bool>);

impl FeatureGates {
    /// The flags' values, later ones overriding earlier ones.
    pub(super) fn merge(values: &[GateSettings]) -> Self {
        let mut all = BTreeMap::new();
        for v in values {
            all.extend(v.0.iter().map(|(k, on)| (k.clone(), *on)));
        }
        FeatureGates(all)
    }

    /// KEP-5237's gate: explicit, else `AllAlpha` (the gate is alpha from 1.35 through
    /// v0.37.0-beta.0), else off (its default).
    pub(super) fn watch_based_routes(&self) -> bool {
        self.0
            .get(WATCH_BASED_ROUTES)
            .or_else(|| self.0.get(ALL_ALPHA))
            .copied()
            .unwrap_or(false)
    }

    /// The gates named that change nothing here, for a warning (`AllAlpha` can turn on the
    /// route gate, so it is not one of them).
    pub(super) fn without_effect(&self) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, _)| k.as_str() != WATCH_BASED_ROUTES && k.as_str() != ALL_ALPHA)
            .map(|(k, on)| format!("{k}={on}"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gates(values: &[&str]) -> Result<FeatureGates, String> {
        let parsed: Result<Vec<_>, _> = values.iter().map(|v| parse_feature_gates(v)).collect();
        Ok(FeatureGates::merge(&parsed?))
    }

    #[test]
    fn the_route_gate_is_off_by_default_and_follows_all_alpha() {
        assert!(!gates(&[]).expect("none").watch_based_routes());
        assert!(!gates(&[""]).expect("empty").watch_based_routes());
        let on = gates(&[&format!("{WATCH_BASED_ROUTES}=true")]).expect("on");
        assert!(on.watch_based_routes());
        assert!(on.without_effect().is_empty());
        assert!(gates(&["AllAlpha=true"]).expect("all").watch_based_routes());
        // An explicit value beats AllAlpha, in either order (upstream: per-feature keys override).
        let off = format!("AllAlpha=true,{WATCH_BASED_ROUTES}=false");
        assert!(!gates(&[&off]).expect("off").watch_based_routes());
        let off = format!("{WATCH_BASED_ROUTES}=false,AllAlpha=true");
        assert!(!gates(&[&off]).expect("off").watch_based_routes());
        // AllBeta does not turn on an alpha gate.
        assert!(!gates(&["AllBeta=true"]).expect("beta").watch_based_routes());
    }

    #[test]
    fn several_flags_merge_and_the_later_wins() {
        let on = format!("{WATCH_BASED_ROUTES}=true");
        let off = format!("{WATCH_BASED_ROUTES}=0");
        assert!(!gates(&[&on, &off]).expect("merged").watch_based_routes());
        assert!(gates(&[&off, &on]).expect("merged").watch_based_routes());
        let with_other = gates(&[&on, "NativeHistograms=T"]).expect("merged");
        assert!(with_other.watch_based_routes());
        assert_eq!(with_other.without_effect(), ["NativeHistograms=true"]);
    }

    #[test]
    fn malformed_and_unknown_gates_are_refused_as_upstream_refuses_them() {
        let err = parse_feature_gates(&format!(" {WATCH_BASED_ROUTES} ")).unwrap_err();
        assert!(
            err.starts_with(&format!("missing bool value for {WATCH_BASED_ROUTES}")),
            "{err}"
        );
        let err = parse_feature_gates(&format!("{WATCH_BASED_ROUTES}=yes")).unwrap_err();
        assert!(
            err.starts_with(&format!("invalid value of {WATCH_BASED_ROUTES}=yes")),
            "{err}"
        );
        let err = parse_feature_gates("WatchBasedRoutes=true").unwrap_err();
        assert!(
            err.starts_with("unrecognized feature gate: WatchBasedRoutes"),
            "{err}"
        );
        // Names are case-sensitive upstream.
        let lower = WATCH_BASED_ROUTES.to_lowercase();
        assert!(parse_feature_gates(&format!("{lower}=true")).is_err());
        // Spaces around names and values are trimmed, empty pairs skipped.
        let spaced = format!(" {WATCH_BASED_ROUTES} = true ,,");
        assert!(gates(&[&spaced]).expect("spaced").watch_based_routes());
    }
}
