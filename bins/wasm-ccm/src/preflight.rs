//! `wasm-ccm run`'s first step: every flag that names a file, a directory or a URL is checked
//! before any work is done (no certificate generated, no registry or API server contacted, no
//! driver compiled), and each problem is said once, naming the flag and what to do.
//!
//! Later steps still read the files and report their own errors (a file can change between the
//! check and the read); this step only makes the common first mistakes — a wrong path, a
//! directory where a file belongs, half of a certificate pair — fail fast and plainly.

use std::path::Path;

use anyhow::bail;

/// One flag naming a path, and what kind of path it must be.
pub(crate) struct PathFlag<'a> {
    /// The flag as the user typed it, e.g. `--kubeconfig`.
    pub flag: &'static str,
    /// The value given, if any.
    pub path: Option<&'a Path>,
    /// What the file is, for the message (`a kubeconfig`, `the driver's .wasm`).
    pub what: &'static str,
    /// What to do instead, for the message.
    pub hint: &'static str,
}

/// Checks that each given path is a readable file; the first problem is the error.
pub(crate) fn readable_files(flags: &[PathFlag<'_>]) -> anyhow::Result<()> {
    for f in flags {
        if let Some(path) = f.path {
            readable_file(f, path)?;
        }
    }
    Ok(())
}

fn readable_file(f: &PathFlag<'_>, path: &Path) -> anyhow::Result<()> {
    let shown = path.display();
    let unreadable = |e: std::io::Error| {
        anyhow::anyhow!(
            "{} {shown}: cannot read {}: {}; {}",
            f.flag,
            f.what,
            io_reason(&e),
            f.hint
        )
    };
    if std::fs::metadata(path).map_err(unreadable)?.is_dir() {
        bail!(
            "{} {shown} is a directory, not {}; {}",
            f.flag,
            f.what,
            f.hint
        );
    }
    std::fs::File::open(path).map(drop).map_err(unreadable)
}

/// A directory flag (`--cert-dir`, `--cache-dir`) must name a directory when it exists (it is
/// created when absent); `what` says what is kept there.
pub(crate) fn directory(flag: &str, dir: Option<&Path>, what: &str) -> anyhow::Result<()> {
    let Some(dir) = dir else { return Ok(()) };
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => bail!(
            "{flag} {} is a file, not a directory; give the directory to keep {what} in",
            dir.display()
        ),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => bail!(
            "{flag} {}: {}; give a directory this process may read and write",
            dir.display(),
            io_reason(&e)
        ),
    }
}

/// The directory `path` is to be written in exists and is a directory, and `path` is not one.
pub(crate) fn output_dir(flag: &str, path: &Path) -> anyhow::Result<()> {
    if path.is_dir() {
        bail!(
            "{flag} {} is a directory; give the file to write, e.g. {}",
            path.display(),
            path.join("driver.wasm").display()
        );
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    match std::fs::metadata(parent) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => bail!(
            "{flag} {}: {} is not a directory; give a path in an existing directory",
            path.display(),
            parent.display()
        ),
        Err(e) => bail!(
            "{flag} {}: cannot use the directory {}: {}; create it first or give a path in an existing directory",
            path.display(),
            parent.display(),
            io_reason(&e)
        ),
    }
}

/// `--tls-cert-file` and `--tls-private-key-file` come together.
pub(crate) fn tls_pair(cert: Option<&Path>, key: Option<&Path>) -> anyhow::Result<()> {
    match (cert, key) {
        (Some(_), None) => bail!(
            "--tls-cert-file is given without --tls-private-key-file; pass both, or neither to use --cert-dir or a generated certificate"
        ),
        (None, Some(_)) => bail!(
            "--tls-private-key-file is given without --tls-cert-file; pass both, or neither to use --cert-dir or a generated certificate"
        ),
        _ => Ok(()),
    }
}

/// `--master` must be an `http(s)://` URL with a host.
pub(crate) fn master_url(master: Option<&str>) -> anyhow::Result<()> {
    let Some(m) = master else { return Ok(()) };
    let ok = url::Url::parse(m).ok().filter(|u| {
        matches!(u.scheme(), "http" | "https") && u.host_str().is_some_and(|h| !h.is_empty())
    });
    if ok.is_none() {
        bail!(
            "--master {m:?} is not an http:// or https:// URL of the API server; e.g. --master https://10.0.0.1:6443"
        );
    }
    Ok(())
}

/// The OS's reason without Rust's `(os error N)` suffix, which repeats it in numbers.
fn io_reason(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// `e` as one line: each cause appended once, skipping a cause whose text the line already
/// holds (libraries often repeat their source's text in their own message, which
/// anyhow's `{:#}` would print twice).
pub(crate) fn one_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if text.is_empty() || line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubeconfig(path: &Path) -> PathFlag<'_> {
        PathFlag {
            flag: "--kubeconfig",
            path: Some(path),
            what: "a kubeconfig",
            hint: "pass a kubeconfig file",
        }
    }

    #[test]
    fn a_missing_file_is_named_once_with_the_flag_and_what_to_do() {
        let e = readable_files(&[kubeconfig(Path::new("/nonexistent/kubeconfig"))])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "--kubeconfig /nonexistent/kubeconfig: cannot read a kubeconfig: No such file or directory; pass a kubeconfig file"
        );
    }

    #[test]
    fn a_directory_is_not_a_file() {
        let e = readable_files(&[kubeconfig(Path::new("/"))])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--kubeconfig / is a directory"), "{e}");
    }

    #[test]
    fn absent_flags_and_readable_files_pass() {
        let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
        readable_files(&[
            kubeconfig(&here),
            PathFlag {
                flag: "--cloud-config",
                path: None,
                what: "a cloud config",
                hint: "",
            },
        ])
        .expect("readable");
    }

    #[test]
    fn an_output_needs_an_existing_directory() {
        let e = output_dir("--output", Path::new("/nonexistent/dir/x.wasm"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "--output /nonexistent/dir/x.wasm: cannot use the directory /nonexistent/dir: No such file or directory; create it first or give a path in an existing directory"
        );
        assert!(output_dir("--output", Path::new("/")).is_err());
        assert!(output_dir("--output", Path::new("x.wasm")).is_ok());
        assert!(output_dir("--output", &std::env::temp_dir().join("x.wasm")).is_ok());
    }

    #[test]
    fn half_a_certificate_pair_is_refused() {
        let p = Path::new("/x");
        assert!(tls_pair(Some(p), None).is_err());
        assert!(tls_pair(None, Some(p)).is_err());
        assert!(tls_pair(Some(p), Some(p)).is_ok());
        assert!(tls_pair(None, None).is_ok());
    }

    #[test]
    fn master_must_be_an_http_url() {
        assert!(master_url(Some("https://10.0.0.1:6443")).is_ok());
        assert!(master_url(Some("http://localhost:8080")).is_ok());
        for bad in ["10.0.0.1:6443", "ftp://x", "https://", "not a url"] {
            assert!(master_url(Some(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_cause_repeated_in_its_parent_is_said_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file (os error 2)");
        let parent = anyhow::Error::new(io).context("failed to read x: No such file (os error 2)");
        let e = parent.context("cannot read --kubeconfig x");
        assert_eq!(
            one_line(&e),
            "cannot read --kubeconfig x: failed to read x: No such file (os error 2)"
        );
    }
}
