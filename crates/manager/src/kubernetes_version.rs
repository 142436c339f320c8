//! The Kubernetes versions wasm-ccm supports: the one place that says which.
//!
//! The policy is the last three Kubernetes minor releases, as the cloudscale.ch
//! cloud-controller-manager states for itself (its README, "Kubernetes Support Policy") and as
//! upstream maintains release branches for the three most recent minors
//! (kubernetes.io/releases/version-skew-policy, "Supported versions"). When a new minor is
//! released, the next wasm-ccm release adds it and drops the oldest, so the window is always
//! [`SUPPORTED_MINORS`]: three consecutive minors of major [`MAJOR`].
//!
//! Everything else follows from here:
//! - the workspace compiles against the oldest ([`OLDEST_MINOR`]: the `k8s-openapi` feature in
//!   the workspace `Cargo.toml`), so the host never uses a field a supported server lacks;
//! - `wasm-ccm run` reads the API server's `gitVersion` at start-up and, outside the window,
//!   warns and sets `wasm_ccm_kubernetes_version_supported` to 0 ([`Support`]);
//! - the Kubernetes API simulator serves the newest by default, and the test command lets the
//!   real clients of each supported minor (kubectl, the official Python client) judge it
//!   (`bins/wasm-ccm-dev/tests/version_policy.rs`, which also holds the newest equal to the
//!   pinned kubectl's minor and the deploy schema checks covering every supported minor).

/// The Kubernetes major version (every release since 2015 is 1.x).
pub const MAJOR: u32 = 1;

/// The oldest supported minor: what the workspace's `k8s-openapi` feature (`v1_35`) compiles
/// against.
pub const OLDEST_MINOR: u32 = 35;

/// The newest supported minor: the minor of the pinned kubectl
/// (`tests/tools/pins/kubectl.txt`), which a test holds equal.
pub const NEWEST_MINOR: u32 = 37;

/// Every supported minor of [`MAJOR`], oldest first: three consecutive releases.
pub const SUPPORTED_MINORS: [u32; 3] = [OLDEST_MINOR, OLDEST_MINOR + 1, NEWEST_MINOR];

/// The `gitVersion` the Kubernetes API simulator and the developer tools report when nothing
/// else is asked for: the newest supported release.
pub const NEWEST_GIT_VERSION: &str = "v1.37.0";

/// Whether `major.minor` is a supported Kubernetes release.
pub fn supported(major: u32, minor: u32) -> bool {
    major == MAJOR && SUPPORTED_MINORS.contains(&minor)
}

/// The supported window for messages, e.g. `1.35 to 1.37`.
pub fn supported_range() -> String {
    format!("{MAJOR}.{OLDEST_MINOR} to {MAJOR}.{NEWEST_MINOR}")
}

/// A Kubernetes release as an API server's `/version` names it in `gitVersion`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Release {
    /// `1` of `v1.36.2`.
    pub major: u32,
    /// `36` of `v1.36.2`.
    pub minor: u32,
    /// `2` of `v1.36.2`.
    pub patch: u32,
}

impl Release {
    /// Reads a `gitVersion`: `v` (optional), `MAJOR.MINOR.PATCH` in decimal digits, then
    /// nothing, or a pre-release (`-rc.1`, a distribution's `-eks-4f3a1c`) or build suffix
    /// (`+k3s1`), as Kubernetes' semantic versions are written (k8s.io/apimachinery
    /// pkg/util/version, `ParseSemantic`). The error says what is wrong with `text`.
    pub fn parse(text: &str) -> Result<Release, String> {
        let trimmed = text.trim();
        let body = trimmed.strip_prefix('v').unwrap_or(trimmed);
        let core_end = body.find(['-', '+']).unwrap_or(body.len());
        let (core, suffix) = body.split_at(core_end);
        if suffix.len() == 1 {
            return Err(format!(
                "{text:?} ends with an empty pre-release or build suffix after {core:?}"
            ));
        }
        let mut parts = core.split('.');
        let mut number = |what: &str| -> Result<u32, String> {
            let part = parts.next().unwrap_or_default();
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!(
                    "{text:?} is not a Kubernetes version like v1.36.2: its {what} is {part:?}"
                ));
            }
            part.parse().map_err(|e| {
                format!("{text:?} is not a Kubernetes version like v1.36.2: its {what}: {e}")
            })
        };
        let release = Release {
            major: number("major")?,
            minor: number("minor")?,
            patch: number("patch")?,
        };
        if parts.next().is_some() {
            return Err(format!(
                "{text:?} is not a Kubernetes version like v1.36.2: more than three numbers"
            ));
        }
        Ok(release)
    }

    /// Whether this release's minor is supported ([`supported`]).
    pub fn is_supported(&self) -> bool {
        supported(self.major, self.minor)
    }
}

impl std::fmt::Display for Release {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// What the host makes of an API server's `gitVersion`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support {
    /// A supported minor.
    Supported(Release),
    /// A release outside [`SUPPORTED_MINORS`].
    Unsupported(Release),
    /// No version could be read (the server refused `/version`, or its `gitVersion` is no
    /// version): the host cannot tell, and says so.
    Unknown(String),
}

impl Support {
    /// The verdict on `git_version` (empty when the server did not tell).
    pub fn of(git_version: &str) -> Support {
        if git_version.trim().is_empty() {
            return Support::Unknown("the API server did not report its version".into());
        }
        match Release::parse(git_version) {
            Ok(release) if release.is_supported() => Support::Supported(release),
            Ok(release) => Support::Unsupported(release),
            Err(e) => Support::Unknown(e),
        }
    }

    /// Whether the server is known to run a supported release (the gauge's 1).
    pub fn is_supported(&self) -> bool {
        matches!(self, Support::Supported(_))
    }

    /// The start-up warning for a server that is not known to be supported, naming
    /// `git_version`, the window and what to do; `None` for a supported one.
    pub fn warning(&self, git_version: &str) -> Option<String> {
        let range = supported_range();
        match self {
            Support::Supported(_) => None,
            Support::Unsupported(release) => {
                let action = if release.major > MAJOR
                    || (release.major == MAJOR && release.minor > NEWEST_MINOR)
                {
                    "use a wasm-ccm release that supports it (or keep the cluster at a supported version)"
                } else {
                    "upgrade the cluster to a supported version, or use an older wasm-ccm release that supports it"
                };
                Some(format!(
                    "the API server runs Kubernetes {git_version}, outside the versions this wasm-ccm supports ({range}, the last three minors); it keeps running, but it is not tested against this version: {action}"
                ))
            }
            Support::Unknown(why) => Some(format!(
                "cannot tell whether the API server's Kubernetes version is supported ({why}); this wasm-ccm supports {range}: check the cluster's version (`kubectl version`) and allow the CCM to read /version"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_git_versions_servers_report() {
        let cases = [
            ("v1.36.2", (1, 36, 2)),
            ("v1.37.0-eks-abc", (1, 37, 0)),
            ("v1.35.1+k3s1", (1, 35, 1)),
            ("v1.37.0-rc.1", (1, 37, 0)),
            ("v1.38.0-alpha.0.12+4f3a1c", (1, 38, 0)),
            ("1.34.9", (1, 34, 9)),
            ("v1.33.0-wasm-ccm-sim", (1, 33, 0)),
            (" v2.0.0 ", (2, 0, 0)),
        ];
        for (text, (major, minor, patch)) in cases {
            assert_eq!(
                Release::parse(text),
                Ok(Release {
                    major,
                    minor,
                    patch
                }),
                "{text}"
            );
        }
    }

    #[test]
    fn refuses_what_is_no_version() {
        for text in [
            "",
            "v",
            "v1",
            "v1.36",
            "v1.36.",
            "v1.36.2.1",
            "v1.x.2",
            "v1.36.2-",
            "v1.36.2+",
            "vv1.36.2",
            "v1.-3.2",
            "v99999999999.1.1",
            "master",
        ] {
            let e = Release::parse(text).expect_err(text);
            assert!(e.contains(&format!("{text:?}")), "{e}");
        }
    }

    #[test]
    fn the_window_is_three_consecutive_minors() {
        assert_eq!(SUPPORTED_MINORS.len(), 3);
        assert!(SUPPORTED_MINORS.windows(2).all(|w| w[1] == w[0] + 1));
        assert_eq!(SUPPORTED_MINORS[0], OLDEST_MINOR);
        assert_eq!(SUPPORTED_MINORS[2], NEWEST_MINOR);
        assert_eq!(
            Release::parse(NEWEST_GIT_VERSION).map(|r| (r.major, r.minor)),
            Ok((MAJOR, NEWEST_MINOR))
        );
        assert_eq!(supported_range(), "1.35 to 1.37");
    }

    #[test]
    fn verdicts_and_their_warnings() {
        for supported_version in ["v1.35.0", "v1.36.4-gke.100", "v1.37.1"] {
            let s = Support::of(supported_version);
            assert!(s.is_supported(), "{supported_version}: {s:?}");
            assert_eq!(s.warning(supported_version), None);
        }
        let old = Support::of("v1.34.3");
        assert!(!old.is_supported());
        let warning = old.warning("v1.34.3").expect("a warning");
        assert!(warning.contains("v1.34.3") && warning.contains("1.35 to 1.37"));
        assert!(warning.contains("upgrade the cluster"), "{warning}");
        let new = Support::of("v1.38.0");
        let warning = new.warning("v1.38.0").expect("a warning");
        assert!(
            warning.contains("use a wasm-ccm release that supports it"),
            "{warning}"
        );
        assert!(!supported(2, 36));
        for unknown in ["", "garbage"] {
            let s = Support::of(unknown);
            assert!(matches!(s, Support::Unknown(_)), "{s:?}");
            let warning = s.warning(unknown).expect("a warning");
            assert!(warning.contains("cannot tell"), "{warning}");
        }
    }
}
