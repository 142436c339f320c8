//! [`Differences`]: a fresh instance's answers compared with a warm one's, per function, and
//! [`show`], a call result in one line for messages.

use std::collections::BTreeMap;

use wasm_ccm_runtime::CallError;

use super::report::Checks;

/// Fresh-instance answers compared with warm ones, per function.
#[derive(Default)]
pub(crate) struct Differences {
    by_function: BTreeMap<String, (usize, Vec<String>)>,
}

impl Differences {
    /// Compares the warm and fresh results of one call.
    pub(crate) fn compare<T: PartialEq + std::fmt::Debug>(
        &mut self,
        function: &str,
        subject: &str,
        warm: &Result<T, CallError>,
        fresh: &Result<T, CallError>,
    ) {
        let entry = self.by_function.entry(function.to_string()).or_default();
        entry.0 += 1;
        if warm != fresh {
            entry.1.push(format!(
                "{subject}: warm {} but fresh {}",
                show(warm),
                show(fresh)
            ));
        }
    }

    pub(super) fn report(&self, checks: &mut Checks) {
        for (function, (compared, differing)) in &self.by_function {
            checks.check(
                "determinism/fresh-equals-warm",
                Some(function),
                if differing.is_empty() {
                    Ok(format!("{compared} calls answered alike"))
                } else {
                    Err(format!(
                        "a fresh instance answers differently, so the driver keeps state between calls: {}",
                        differing.join("; ")
                    ))
                },
            );
        }
    }
}

/// A call result in one line, for messages.
pub(crate) fn show<T: std::fmt::Debug>(r: &Result<T, CallError>) -> String {
    let text = match r {
        Ok(v) => format!("{v:?}"),
        Err(e) => format!("error: {e}"),
    };
    if text.chars().count() > 300 {
        format!("{}…", text.chars().take(300).collect::<String>())
    } else {
        text
    }
}
