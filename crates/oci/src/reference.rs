//! `oci://REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST]` references.

use std::fmt;

/// A parsed artifact reference. The registry is always explicit: there is no implied Docker
/// Hub, so a reference means the same thing on every machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// `host[:port]`.
    pub registry: String,
    /// `path/to/repo`.
    pub repository: String,
    /// The tag, if one was given.
    pub tag: Option<String>,
    /// `sha256:<64 hex>`, if one was given; it wins over the tag.
    pub digest: Option<String>,
}

/// The scheme of references on the command line.
pub const SCHEME: &str = "oci://";

impl Reference {
    /// Parses `oci://REGISTRY/REPO:TAG`, `oci://REGISTRY/REPO@sha256:…` or both (`oci://` may
    /// be left out). A reference with neither tag nor digest is refused: an implied `latest`
    /// would change under a running controller.
    pub fn parse(input: &str) -> Result<Reference, String> {
        let bad = |why: &str| {
            format!(
                "{input:?} is not an OCI reference: {why} (expected oci://REGISTRY/REPOSITORY:TAG or oci://REGISTRY/REPOSITORY@sha256:DIGEST)"
            )
        };
        let rest = input.strip_prefix(SCHEME).unwrap_or(input);
        let (name, digest) = match rest.split_once('@') {
            Some((name, digest)) => (name, Some(parse_digest(digest).map_err(|e| bad(&e))?)),
            None => (rest, None),
        };
        let (registry, path) = name
            .split_once('/')
            .ok_or_else(|| bad("it names no repository after the registry"))?;
        if registry.is_empty() {
            return Err(bad("the registry is empty"));
        }
        if !registry
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c))
        {
            return Err(bad(&format!("{registry:?} is not a registry host[:port]")));
        }
        // The tag is after the last ':' of the last path segment (a ':' before is a port).
        let (repository, tag) = match path.rsplit_once(':') {
            Some((repo, tag)) if !tag.contains('/') => (repo, Some(tag)),
            _ => (path, None),
        };
        check_repository(repository).map_err(|e| bad(&e))?;
        if let Some(tag) = tag {
            check_tag(tag).map_err(|e| bad(&e))?;
        }
        if tag.is_none() && digest.is_none() {
            return Err(bad("it has neither a tag nor a digest"));
        }
        Ok(Reference {
            registry: registry.to_string(),
            repository: repository.to_string(),
            tag: tag.map(str::to_string),
            digest,
        })
    }

    /// What to ask the registry for: the digest if there is one, else the tag.
    pub(crate) fn manifest_ref(&self) -> &str {
        self.digest
            .as_deref()
            .or(self.tag.as_deref())
            .unwrap_or("latest")
    }

    /// The same artifact pinned to `digest`, keeping the tag for readers.
    pub fn pinned(&self, digest: &str) -> Reference {
        Reference {
            digest: Some(digest.to_string()),
            ..self.clone()
        }
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

/// Accepts `sha256:` and 64 lowercase hex digits (the only algorithm registries use).
pub(crate) fn parse_digest(digest: &str) -> Result<String, String> {
    let hex = digest
        .strip_prefix("sha256:")
        .ok_or_else(|| format!("digest {digest:?} is not sha256:<64 hex digits>"))?;
    if hex.len() != 64
        || !hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(format!(
            "digest {digest:?} is not sha256:<64 lowercase hex digits>"
        ));
    }
    Ok(digest.to_string())
}

/// The distribution spec's repository grammar: lowercase components joined by `/`, each
/// `[a-z0-9]+` separated by `.`, `_`, `__` or `-`s.
fn check_repository(repo: &str) -> Result<(), String> {
    let ok_component = |c: &str| {
        !c.is_empty()
            && c.starts_with(|ch: char| ch.is_ascii_lowercase() || ch.is_ascii_digit())
            && c.ends_with(|ch: char| ch.is_ascii_lowercase() || ch.is_ascii_digit())
            && c.chars()
                .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || "._-".contains(ch))
    };
    if repo.is_empty() || !repo.split('/').all(ok_component) {
        return Err(format!(
            "repository {repo:?} must be lowercase letters, digits and . _ - in /-separated parts"
        ));
    }
    Ok(())
}

fn check_tag(tag: &str) -> Result<(), String> {
    let valid = !tag.is_empty()
        && tag.len() <= 128
        && tag.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
        && tag
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if valid {
        Ok(())
    } else {
        Err(format!(
            "tag {tag:?} must be 1–128 letters, digits, '_', '.' or '-', not starting with '.' or '-'"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn tags_digests_and_ports_are_told_apart() {
        let r = Reference::parse("oci://127.0.0.1:5000/drivers/cloudscale:0.1.0").unwrap();
        assert_eq!(r.registry, "127.0.0.1:5000");
        assert_eq!(r.repository, "drivers/cloudscale");
        assert_eq!(r.tag.as_deref(), Some("0.1.0"));
        assert_eq!(r.digest, None);
        assert_eq!(r.manifest_ref(), "0.1.0");

        let r = Reference::parse(&format!("ghcr.io/org/drv@{D}")).unwrap();
        assert_eq!((r.tag.as_deref(), r.digest.as_deref()), (None, Some(D)));
        assert_eq!(r.manifest_ref(), D);
        assert_eq!(r.to_string(), format!("oci://ghcr.io/org/drv@{D}"));

        let both = Reference::parse(&format!("oci://[::1]:5000/a/b:v1@{D}")).unwrap();
        assert_eq!(both.registry, "[::1]:5000");
        assert_eq!(both.manifest_ref(), D, "the digest wins over the tag");
        assert_eq!(both.to_string(), format!("oci://[::1]:5000/a/b:v1@{D}"));
        let tagged = Reference::parse("oci://r.example/a:v1").unwrap();
        assert_eq!(
            tagged.pinned(D).to_string(),
            format!("oci://r.example/a:v1@{D}")
        );
    }

    #[test]
    fn bad_references_say_what_is_wrong() {
        for (input, says) in [
            ("oci://ghcr.io/org/drv", "neither a tag nor a digest"),
            ("oci://cloudscale:1.0", "no repository"),
            ("oci://ghcr.io/Org/drv:1", "repository \"Org/drv\""),
            ("oci://ghcr.io/org//drv:1", "repository"),
            ("oci://ghcr.io/org/drv:-x", "tag \"-x\""),
            ("oci://ghcr.io/org/drv@sha256:abc", "64 lowercase hex"),
            ("oci://ghcr.io/org/drv@md5:abc", "not sha256:"),
            ("oci:///drv:1", "registry is empty"),
            ("oci://bad host/drv:1", "not a registry"),
        ] {
            let err = Reference::parse(input).unwrap_err();
            assert!(err.contains(says), "{input}: {err}");
            assert!(err.contains("expected oci://"), "{err}");
        }
    }
}
