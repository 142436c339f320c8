//! Ports for child processes a test starts with an explicit `--port`-style flag (the CCM's
//! `--secure-port`, the registry's listen address).
//!
//! Binding port 0, reading the port and closing the socket leaves a window in which any other
//! socket bound to port 0 in the machine (a simulator of a test running in parallel, a client)
//! can be given the same port by the kernel; the child then fails with "Address already in
//! use" (seen in CI: a CCM of one test lost its port to another test's listener). Ports below
//! the kernel's ephemeral range are never handed out for port 0, so choosing one there, checking
//! it binds, and never handing it out twice in this process closes that window. Test binaries
//! run one after the other under `cargo test`, so other processes are not a concern.

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::sync::Mutex;

/// The ports this process handed out.
static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// Where the kernel's ephemeral range starts (`/proc/sys/net/ipv4/ip_local_port_range`),
/// 32768 when it cannot be read.
fn ephemeral_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768)
}

/// A loopback port below the ephemeral range that binds now and that this process has not
/// handed out before; an error when none of the range's ports is free.
pub fn reserve() -> Result<u16, String> {
    let end = ephemeral_start().max(12_000);
    let start = end - 10_000;
    let span = u32::from(end - start);
    let mut given = GIVEN
        .lock()
        .map_err(|_| "the port registry's lock is poisoned".to_string())?;
    // Start at a spot of this process's own, so two test processes (a developer running two
    // at once) rarely probe the same ports first.
    let offset = std::process::id() % span;
    for i in 0..span {
        let port = start + ((offset + i) % span) as u16;
        if given.contains(&port) {
            continue;
        }
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            given.insert(port);
            return Ok(port);
        }
    }
    Err(format!(
        "no free loopback port in {start}..{end} (below the ephemeral range)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_below_the_ephemeral_range_bindable_and_never_given_twice() {
        let ports: Vec<u16> = (0..50).map(|_| reserve().expect("a port")).collect();
        let distinct: BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len());
        for port in ports {
            assert!(port < ephemeral_start(), "{port}");
            TcpListener::bind(("127.0.0.1", port)).expect("still free");
        }
    }
}
