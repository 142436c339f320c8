//! How kubelet names a Node, so that a node without a provider ID is matched to its server the
//! way its name was made (review 2026-11-28 §3).

/// The Node name kubelet makes of a host name: `k8s.io/component-helpers/node/util`
/// `GetHostname`, which kubelet applies to the OS hostname and to `--hostname-override` alike,
/// trims surrounding whitespace (`strings.TrimSpace`, Unicode `White_Space` as `str::trim`) and
/// lower-cases (`strings.ToLower`: a rune at a time by Unicode's simple mapping, which is the
/// first `char` of `char::to_lowercase`). Nothing else: a trailing dot stays, and a name that is
/// then no valid Node name (a dot at the end, `(`) matches no Node.
pub fn of_hostname(hostname: &str) -> String {
    hostname
        .trim()
        .chars()
        .map(|c| c.to_lowercase().next().unwrap_or(c))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::of_hostname;

    #[test]
    fn as_kubelet_names_nodes() {
        assert_eq!(of_hostname("Node-E"), "node-e");
        assert_eq!(of_hostname(" node-e\n"), "node-e");
        assert_eq!(of_hostname("node-e."), "node-e.");
        // Go's simple mapping: U+0130 lower-cases to a plain `i`, U+212A (Kelvin) to `k`.
        assert_eq!(of_hostname("\u{130}\u{212a}"), "ik");
    }
}
