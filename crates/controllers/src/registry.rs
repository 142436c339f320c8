//! The controllers, listed once. `--controllers` parsing ([`EnabledControllers`], here), the
//! export check and the start-up (`run.rs`) all read [`CONTROLLERS`]; adding a controller is its
//! folder under `controllers/` (which defines its `ENTRY`, see `controllers/entry.rs`), its
//! `mod` line in `controllers/mod.rs` and one line here.

use crate::controllers::entry::ControllerEntry;
use crate::controllers::{lifecycle, node, route, service};

/// Every controller, in upstream's order. At most 8 (the enabled set is a bit mask).
#[rustfmt::skip]
pub(crate) const CONTROLLERS: &[ControllerEntry] = &[
    node::ENTRY,
    lifecycle::ENTRY,
    service::ENTRY,
    route::ENTRY,
];

/// Which controllers run: a set over the table in `registry.rs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnabledControllers {
    /// Bit `i` set: `CONTROLLERS[i]` runs.
    mask: u8,
}

impl EnabledControllers {
    /// Every controller (upstream's `*`: all are on by default).
    pub const ALL: EnabledControllers = EnabledControllers {
        mask: ((1u16 << CONTROLLERS.len()) - 1) as u8,
    };

    /// No controller.
    pub const NONE: EnabledControllers = EnabledControllers { mask: 0 };

    /// Whether the controller named `name` (canonical or alias) runs; unknown names do not.
    pub fn is_enabled(&self, name: &str) -> bool {
        position(name).is_some_and(|i| self.mask & (1 << i) != 0)
    }

    /// The canonical names of the controllers that run, in upstream's order.
    pub fn names(&self) -> Vec<&'static str> {
        CONTROLLERS
            .iter()
            .enumerate()
            .filter(|(i, _)| self.mask & (1 << i) != 0)
            .map(|(_, c)| c.name)
            .collect()
    }

    /// Parses `--controllers` with upstream's rules: `*` enables every controller that is on by
    /// default (all of them), `name` enables, `-name` disables, the first explicit mention of a
    /// controller wins, aliases map to canonical names, unknown names are an error.
    pub fn parse(items: &[String]) -> Result<Self, String> {
        let mut explicit: Vec<Option<bool>> = vec![None; CONTROLLERS.len()];
        let mut star = false;
        for item in items.iter().flat_map(|i| i.split(',')).map(str::trim) {
            if item.is_empty() {
                continue;
            }
            if item == "*" {
                star = true;
                continue;
            }
            let (on, name) = match item.strip_prefix('-') {
                Some(name) => (false, name),
                None => (true, item),
            };
            let Some(i) = position(name) else {
                let known: Vec<String> = CONTROLLERS
                    .iter()
                    .map(|c| format!("{} ({})", c.name, c.alias))
                    .collect();
                return Err(format!(
                    "--controllers: unknown controller {name:?}; known: *, {}",
                    known.join(", ")
                ));
            };
            explicit[i].get_or_insert(on);
        }
        let mask = explicit
            .iter()
            .enumerate()
            .filter(|(_, on)| on.unwrap_or(star))
            .fold(0u8, |mask, (i, _)| mask | (1 << i));
        Ok(EnabledControllers { mask })
    }
}

/// The position of `name` (canonical or alias) in [`CONTROLLERS`].
pub(crate) fn position(name: &str) -> Option<usize> {
    CONTROLLERS
        .iter()
        .position(|c| c.name == name || c.alias == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<EnabledControllers, String> {
        EnabledControllers::parse(&[s.to_string()])
    }

    #[test]
    fn names_are_unique_and_fit_the_mask() {
        assert!(CONTROLLERS.len() <= 8);
        let mut seen = std::collections::HashSet::new();
        for c in CONTROLLERS {
            assert!(seen.insert(c.name) && seen.insert(c.alias), "{}", c.name);
        }
        assert_eq!(position("service"), Some(2));
        assert_eq!(position("node-route-controller"), Some(3));
        assert_eq!(position("nodes"), None);
    }

    #[test]
    fn controllers_flag_table() {
        let names = |s: &str| parse(s).map(|c| c.names());
        let all = EnabledControllers::ALL.names();
        assert_eq!(all.len(), 4);
        assert_eq!(names("*"), Ok(all.clone()));
        let no_route = vec![
            "cloud-node-controller",
            "cloud-node-lifecycle-controller",
            "service-lb-controller",
        ];
        assert_eq!(names("*,-route"), Ok(no_route.clone()));
        assert_eq!(names("-node-route-controller,*"), Ok(no_route));
        assert_eq!(
            names("service,cloud-node"),
            Ok(vec!["cloud-node-controller", "service-lb-controller"])
        );
        // The first explicit mention wins.
        assert_eq!(
            parse("service,-service").map(|c| c.is_enabled("service")),
            Ok(true)
        );
        assert_eq!(parse(""), Ok(EnabledControllers::NONE));
        let err = parse("*,nodes").unwrap_err();
        assert!(
            err.contains("unknown controller \"nodes\"") && err.contains("cloud-node"),
            "{err}"
        );
        assert!(EnabledControllers::ALL.is_enabled("cloud-node-lifecycle"));
        assert!(!EnabledControllers::ALL.is_enabled("nodes"));
    }
}
