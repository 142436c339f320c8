//! `deploy/image/build-oci-image.sh` writes an OCI image layout that a registry and a runtime
//! accept: every descriptor's digest and size match its blob, the config's diff_ids are the
//! digests of the uncompressed layers, the layer holds exactly the files of the Containerfile's
//! final stage with their owners and modes, and the same input gives the same bytes.
//!
//! The script runs with `--binary` (a small stand-in, so no release build) and `--ca-bundle`
//! (a stand-in bundle, so the result does not depend on the machine's), each run in its own
//! temporary directory.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use sha2::{Digest, Sha256};
use tempfile::TempDir;

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
const OCI_LAYER_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

const BINARY: &str = "usr/local/bin/wasm-ccm";
/// The label naming the driver contract (`wasm-ccm:provider@X.Y.Z`).
const CONTRACT_LABEL: &str = "io.wasm-ccm.driver-contract";
const FAKE_BINARY: &[u8] = b"#!/bin/false\nnot wasm-ccm: a stand-in for the image test\n";
const FAKE_CA: &[u8] = b"-----BEGIN CERTIFICATE-----\nc3RhbmQtaW4=\n-----END CERTIFICATE-----\n";

/// What the layer must hold, in order: type (d or f), mode, uid:gid, path.
const EXPECTED_ENTRIES: &[&str] = &[
    "d 0755 0:0 etc/",
    "f 0644 0:0 etc/group",
    "f 0644 0:0 etc/passwd",
    "d 0755 0:0 etc/ssl/",
    "d 0755 0:0 etc/ssl/certs/",
    "f 0644 0:0 etc/ssl/certs/ca-certificates.crt",
    "d 0755 0:0 usr/",
    "d 0755 0:0 usr/local/",
    "d 0755 0:0 usr/local/bin/",
    "f 0755 0:0 usr/local/bin/wasm-ccm",
    "d 0755 0:0 var/",
    "d 0755 0:0 var/cache/",
    "d 0755 65532:65532 var/cache/wasm-ccm/",
];

fn script() -> PathBuf {
    wasm_ccm_deploy_tests::deploy_dir().join("image/build-oci-image.sh")
}

/// A temporary directory with the stand-in binary and CA bundle.
struct Fixture {
    dir: TempDir,
    binary: PathBuf,
    ca: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        let binary = dir.path().join("wasm-ccm");
        let ca = dir.path().join("ca.crt");
        std::fs::write(&binary, FAKE_BINARY).expect("write the stand-in binary");
        // Not executable here: the layer must still carry it as 0755.
        set_mode(&binary, 0o600);
        std::fs::write(&ca, FAKE_CA).expect("write the stand-in CA bundle");
        Fixture { dir, binary, ca }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Runs the script with the stand-ins and `extra` arguments.
    fn build(&self, extra: &[&OsStr], epoch: Option<&str>) -> Output {
        let mut cmd = Command::new("bash");
        cmd.arg(script())
            .arg("--binary")
            .arg(&self.binary)
            .arg("--ca-bundle")
            .arg(&self.ca)
            .args(extra)
            .env_remove("CARGO_TARGET_DIR")
            .env("TMPDIR", self.dir.path());
        match epoch {
            Some(epoch) => cmd.env("SOURCE_DATE_EPOCH", epoch),
            None => cmd.env_remove("SOURCE_DATE_EPOCH"),
        };
        cmd.output().expect("run build-oci-image.sh with bash")
    }

    /// Builds into `out` and fails the test with the script's output if it fails.
    fn build_ok(&self, out: &Path, extra: &[&OsStr], epoch: Option<&str>) -> Output {
        let mut args: Vec<&OsStr> = vec![OsStr::new("--out"), out.as_os_str()];
        args.extend_from_slice(extra);
        let output = self.build(&args, epoch);
        assert!(
            output.status.success(),
            "build-oci-image.sh failed ({}):\n{}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        output
    }
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn read_json(path: &Path) -> Value {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// The blob a descriptor names, after checking its media type, digest and size as a registry
/// does on push.
fn blob(layout: &Path, descriptor: &Value, media_type: &str) -> (PathBuf, Vec<u8>) {
    assert_eq!(descriptor["mediaType"], media_type, "{descriptor}");
    let digest = descriptor["digest"].as_str().expect("digest is a string");
    let hex = digest
        .strip_prefix("sha256:")
        .unwrap_or_else(|| panic!("digest {digest} is not sha256"));
    assert!(
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "digest {digest} is not 64 lowercase hex digits"
    );
    let path = layout.join("blobs/sha256").join(hex);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("blob {digest}: {e}"));
    assert_eq!(sha256_hex(&bytes), hex, "blob {digest} has other content");
    assert_eq!(
        descriptor["size"].as_u64(),
        Some(bytes.len() as u64),
        "size of blob {digest}"
    );
    (path, bytes)
}

/// One entry of a tar archive, read from its ustar header.
#[derive(Debug)]
struct TarEntry {
    path: String,
    directory: bool,
    mode: u32,
    uid: u64,
    gid: u64,
    mtime: u64,
    data: Vec<u8>,
}

fn octal(field: &[u8]) -> u64 {
    let text = std::str::from_utf8(field).expect("octal field is ASCII");
    let text = text.trim_matches(|c| c == '\0' || c == ' ');
    u64::from_str_radix(text, 8).unwrap_or_else(|e| panic!("octal field {text:?}: {e}"))
}

fn text(field: &[u8]) -> String {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    String::from_utf8(field[..end].to_vec()).expect("name is UTF-8")
}

/// Parses an uncompressed tar: the entries with their headers' fields (checksums verified).
fn tar_entries(tar: &[u8]) -> Vec<TarEntry> {
    assert_eq!(tar.len() % 512, 0, "a tar is whole 512-byte blocks");
    let mut entries = Vec::new();
    let mut at = 0;
    loop {
        let header = &tar[at..at + 512];
        if header.iter().all(|&b| b == 0) {
            break;
        }
        let stored = octal(&header[148..156]);
        let sum: u64 = header
            .iter()
            .enumerate()
            .map(|(i, &b)| {
                if (148..156).contains(&i) {
                    32
                } else {
                    u64::from(b)
                }
            })
            .sum();
        assert_eq!(sum, stored, "header checksum at offset {at}");
        let name = text(&header[0..100]);
        let prefix = text(&header[345..500]);
        let path = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        let size = usize::try_from(octal(&header[124..136])).expect("size");
        let typeflag = header[156];
        assert!(
            matches!(typeflag, b'0' | 0 | b'5'),
            "{path}: only regular files and directories belong in the layer (type {typeflag})"
        );
        let data_at = at + 512;
        entries.push(TarEntry {
            directory: typeflag == b'5',
            mode: u32::try_from(octal(&header[100..108])).expect("mode"),
            uid: octal(&header[108..116]),
            gid: octal(&header[116..124]),
            mtime: octal(&header[136..148]),
            data: tar[data_at..data_at + size].to_vec(),
            path,
        });
        at = data_at + size.div_ceil(512) * 512;
    }
    assert!(
        tar[at..].iter().all(|&b| b == 0),
        "only zero blocks after the end marker"
    );
    entries
}

fn run_ok(cmd: &mut Command) -> Vec<u8> {
    let shown = format!("{cmd:?}");
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {shown}: {e}"));
    assert!(
        output.status.success(),
        "{shown} failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

/// What a checked layout holds.
struct Image {
    manifest_digest: String,
    config: Value,
    entries: Vec<TarEntry>,
}

/// Checks `layout` the way a registry and a runtime read it, and returns the image.
fn check_layout(layout: &Path, tag: &str) -> Image {
    assert_eq!(
        read_json(&layout.join("oci-layout")),
        serde_json::json!({ "imageLayoutVersion": "1.0.0" })
    );

    let index = read_json(&layout.join("index.json"));
    assert_eq!(index["schemaVersion"], 2);
    assert_eq!(index["mediaType"], OCI_INDEX);
    let manifests = index["manifests"].as_array().expect("manifests");
    assert_eq!(manifests.len(), 1, "{index}");
    let descriptor = &manifests[0];
    assert_eq!(
        descriptor["annotations"]["org.opencontainers.image.ref.name"],
        tag
    );
    assert_eq!(descriptor["platform"]["architecture"], "amd64");
    assert_eq!(descriptor["platform"]["os"], "linux");
    let (_, manifest_bytes) = blob(layout, descriptor, OCI_MANIFEST);
    let manifest: Value = serde_json::from_slice(&manifest_bytes).expect("manifest is JSON");
    assert_eq!(manifest["schemaVersion"], 2);
    assert_eq!(manifest["mediaType"], OCI_MANIFEST);

    let (_, config_bytes) = blob(layout, &manifest["config"], OCI_CONFIG);
    let config: Value = serde_json::from_slice(&config_bytes).expect("config is JSON");
    let layers = manifest["layers"].as_array().expect("layers");
    assert!(!layers.is_empty(), "an image has layers");
    let diff_ids = config["rootfs"]["diff_ids"].as_array().expect("diff_ids");
    assert_eq!(config["rootfs"]["type"], "layers");
    assert_eq!(diff_ids.len(), layers.len(), "one diff_id per layer");

    let mut entries = Vec::new();
    for (layer, diff_id) in layers.iter().zip(diff_ids) {
        let (path, gz) = blob(layout, layer, OCI_LAYER_GZIP);
        // gzip -n: no file name, no time stamp, so the bytes depend on the content alone.
        assert_eq!(gz[..3], [0x1f, 0x8b, 8], "gzip (deflate) magic");
        assert_eq!(gz[3] & 0x08, 0, "the gzip header names no file");
        assert_eq!(gz[4..8], [0, 0, 0, 0], "the gzip header has no time stamp");
        let tar = run_ok(Command::new("gzip").arg("-dc").arg(&path));
        assert_eq!(
            diff_id.as_str(),
            Some(format!("sha256:{}", sha256_hex(&tar)).as_str()),
            "diff_id is the digest of the uncompressed layer"
        );
        let parsed = tar_entries(&tar);
        // GNU tar reads the same entries.
        let listing = run_ok(Command::new("tar").arg("-tzf").arg(&path));
        let names: Vec<&str> = parsed.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            String::from_utf8(listing)
                .expect("listing")
                .lines()
                .collect::<Vec<_>>(),
            names
        );
        entries.extend(parsed);
    }

    // Nothing but the blobs the manifest names.
    let mut stored: Vec<String> = std::fs::read_dir(layout.join("blobs/sha256"))
        .expect("blobs/sha256")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    stored.sort();
    let mut named: Vec<String> = std::iter::once(&descriptor["digest"])
        .chain(std::iter::once(&manifest["config"]["digest"]))
        .chain(layers.iter().map(|l| &l["digest"]))
        .map(|d| d.as_str().expect("digest")["sha256:".len()..].to_string())
        .collect();
    named.sort();
    assert_eq!(stored, named, "blobs/sha256 holds exactly the named blobs");

    Image {
        manifest_digest: descriptor["digest"].as_str().expect("digest").to_string(),
        config,
        entries,
    }
}

/// Every file under `dir` with the sha256 of its content, by relative path.
fn tree(dir: &Path) -> BTreeMap<PathBuf, String> {
    fn walk(root: &Path, dir: &Path, into: &mut BTreeMap<PathBuf, String>) {
        for entry in std::fs::read_dir(dir).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                walk(root, &path, into);
            } else {
                let bytes = std::fs::read(&path).expect("read");
                let relative = path.strip_prefix(root).expect("under root").into();
                into.insert(relative, sha256_hex(&bytes));
            }
        }
    }
    let mut files = BTreeMap::new();
    walk(dir, dir, &mut files);
    files
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn writes_a_valid_oci_image_layout() {
    let fx = Fixture::new();
    let out = fx.path("oci");
    let output = fx.build_ok(&out, &[], None);
    // The default tag is the workspace version, which is this crate's.
    let image = check_layout(&out, env!("CARGO_PKG_VERSION"));

    let layout: Vec<String> = image
        .entries
        .iter()
        .map(|e| {
            let kind = if e.directory { 'd' } else { 'f' };
            format!("{kind} {:04o} {}:{} {}", e.mode, e.uid, e.gid, e.path)
        })
        .collect();
    assert_eq!(layout, EXPECTED_ENTRIES, "the layer's entries");
    assert!(
        image.entries.iter().all(|e| e.mtime == 0),
        "mtimes are SOURCE_DATE_EPOCH (0)"
    );
    let file = |path: &str| {
        &image
            .entries
            .iter()
            .find(|e| e.path == path)
            .unwrap_or_else(|| panic!("{path} in the layer"))
            .data
    };
    assert_eq!(file(BINARY), FAKE_BINARY, "the binary is the one given");
    assert_eq!(file("etc/ssl/certs/ca-certificates.crt"), FAKE_CA);
    let passwd = String::from_utf8(file("etc/passwd").clone()).expect("passwd");
    assert!(
        passwd
            .lines()
            .any(|l| l.starts_with("nonroot:x:65532:65532:")),
        "{passwd}"
    );
    let group = String::from_utf8(file("etc/group").clone()).expect("group");
    assert!(group.lines().any(|l| l == "nonroot:x:65532:"), "{group}");

    let config = &image.config;
    assert_eq!(config["architecture"], "amd64");
    assert_eq!(config["os"], "linux");
    assert_eq!(config["created"], "1970-01-01T00:00:00Z");
    let run = &config["config"];
    assert_eq!(run["User"], "65532:65532");
    assert_eq!(run["Entrypoint"], serde_json::json!([format!("/{BINARY}")]));
    let env: Vec<&str> = run["Env"]
        .as_array()
        .expect("Env")
        .iter()
        .map(|v| v.as_str().expect("Env entry"))
        .collect();
    assert!(
        env.contains(&"WASM_CCM_CACHE_DIR=/var/cache/wasm-ccm"),
        "{env:?}"
    );
    let path = env
        .iter()
        .find_map(|e| e.strip_prefix("PATH="))
        .expect("PATH is set");
    assert!(path.split(':').any(|d| d == "/usr/local/bin"), "{path}");
    let labels = &run["Labels"];
    assert_eq!(labels["org.opencontainers.image.title"], "wasm-ccm");
    assert_eq!(labels["org.opencontainers.image.licenses"], "Apache-2.0");
    assert_eq!(
        labels["org.opencontainers.image.version"],
        env!("CARGO_PKG_VERSION")
    );
    // The driver contract the binary implements, read from wit/provider.wit.
    let contract = wasm_ccm_test_tools::contract::qualified().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(labels[CONTRACT_LABEL], contract.as_str(), "{labels}");
    for label in [
        "org.opencontainers.image.description",
        "org.opencontainers.image.source",
    ] {
        assert!(
            labels[label].as_str().is_some_and(|s| !s.is_empty()),
            "label {label}: {labels}"
        );
    }

    // The summary names the manifest and the sizes; the stand-in draws a warning, not an error.
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains(&image.manifest_digest), "{stdout}");
    assert!(stdout.contains("compressed size:"), "{stdout}");
    assert!(stdout.contains("uncompressed size:"), "{stdout}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("not a statically linked"), "{stderr}");
    // The layout was written beside --out and moved into place: nothing else is left there.
    assert_eq!(names_in(fx.dir.path()), ["ca.crt", "oci", "wasm-ccm"]);
}

#[test]
fn the_same_input_gives_the_same_digests() {
    let fx = Fixture::new();
    let first = fx.path("first");
    let second = fx.path("second");
    fx.build_ok(&first, &[], None);
    let before = tree(&first);
    // Into the same directory again (the old layout is replaced) and into another one.
    fx.build_ok(&first, &[], None);
    fx.build_ok(&second, &[], None);
    assert_eq!(tree(&first), before, "a rebuild in place changes no byte");
    assert_eq!(tree(&second), before, "a build elsewhere changes no byte");

    // SOURCE_DATE_EPOCH is the one time in the image.
    let dated = fx.path("dated");
    fx.build_ok(&dated, &[], Some("1700000000"));
    let image = check_layout(&dated, env!("CARGO_PKG_VERSION"));
    assert_eq!(image.config["created"], "2023-11-14T22:13:20Z");
    assert!(image.entries.iter().all(|e| e.mtime == 1_700_000_000));
    assert_ne!(
        image.manifest_digest,
        check_layout(&first, env!("CARGO_PKG_VERSION")).manifest_digest
    );
}

#[test]
fn the_archive_holds_the_layout() {
    let fx = Fixture::new();
    let out = fx.path("oci");
    let archive = fx.path("dist/wasm-ccm.tar");
    fx.build_ok(
        &out,
        &[
            OsStr::new("--tag"),
            OsStr::new("v1.2.3-rc.1"),
            OsStr::new("--archive"),
            archive.as_os_str(),
        ],
        None,
    );
    check_layout(&out, "v1.2.3-rc.1");

    let listing = run_ok(Command::new("tar").arg("-tf").arg(&archive));
    let listing = String::from_utf8(listing).expect("listing");
    assert!(
        listing.lines().any(|l| l == "oci-layout") && listing.lines().any(|l| l == "index.json"),
        "the layout is at the archive's root:\n{listing}"
    );
    let unpacked = fx.path("unpacked");
    std::fs::create_dir(&unpacked).expect("mkdir");
    run_ok(
        Command::new("tar")
            .arg("-xf")
            .arg(&archive)
            .arg("-C")
            .arg(&unpacked),
    );
    assert_eq!(tree(&unpacked), tree(&out));
    check_layout(&unpacked, "v1.2.3-rc.1");
}

/// Runs the script with arguments that must be refused; returns its stderr.
fn refused(fx: &Fixture, args: &[&OsStr]) -> String {
    let output = fx.build(args, None);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "accepted {args:?}: {stderr}");
    assert!(stderr.contains("error:"), "{stderr}");
    stderr
}

#[test]
fn bad_input_is_refused_and_nothing_is_written() {
    let fx = Fixture::new();
    let out = fx.path("oci");
    let archive = fx.path("wasm-ccm.tar");
    let missing = fx.path("no-such-dir/wasm-ccm");
    let out_args = [
        OsStr::new("--out"),
        out.as_os_str(),
        OsStr::new("--archive"),
        archive.as_os_str(),
    ];

    // --binary comes later on the command line and wins over the fixture's.
    let mut args = out_args.to_vec();
    args.extend([OsStr::new("--binary"), missing.as_os_str()]);
    let stderr = refused(&fx, &args);
    assert!(
        stderr.contains(&*missing.to_string_lossy()),
        "names the path: {stderr}"
    );

    let no_ca = fx.path("no-ca.crt");
    let mut args = out_args.to_vec();
    args.extend([OsStr::new("--ca-bundle"), no_ca.as_os_str()]);
    let stderr = refused(&fx, &args);
    assert!(stderr.contains(&*no_ca.to_string_lossy()), "{stderr}");

    for tag in ["-leading-dash", "has:colon", ""] {
        let mut args = out_args.to_vec();
        args.extend([OsStr::new("--tag"), OsStr::new(tag)]);
        if tag.is_empty() {
            // An empty --tag means the default; a missing value is the error here.
            args.pop();
        }
        refused(&fx, &args);
    }
    refused(&fx, &[OsStr::new("--no-such-option")]);

    assert_eq!(
        names_in(fx.dir.path()),
        ["ca.crt", "wasm-ccm"],
        "nothing written"
    );
}

#[test]
fn only_a_previous_layout_is_replaced() {
    let fx = Fixture::new();
    let out = fx.path("precious");
    std::fs::create_dir(&out).expect("mkdir");
    std::fs::write(out.join("notes.txt"), "keep me").expect("write");
    let stderr = refused(&fx, &[OsStr::new("--out"), out.as_os_str()]);
    assert!(stderr.contains("refusing"), "{stderr}");
    assert_eq!(names_in(&out), ["notes.txt"]);

    // An empty directory is fine to fill.
    let empty = fx.path("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    fx.build_ok(&empty, &[], None);
    check_layout(&empty, env!("CARGO_PKG_VERSION"));
}

#[test]
fn the_script_passes_bash_n_and_shellcheck() {
    run_ok(Command::new("bash").arg("-n").arg(script()));
    let shellcheck = wasm_ccm_test_tools::debian_program("shellcheck", "shellcheck")
        .unwrap_or_else(|e| panic!("shellcheck: {e}"));
    let output = Command::new(&shellcheck)
        .arg("--shell=bash")
        .arg(script())
        .output()
        .expect("run shellcheck");
    assert!(
        output.status.success(),
        "shellcheck {}:\n{}",
        script().display(),
        String::from_utf8_lossy(&output.stdout)
    );
}

/// The default of `ARG name=…` in the Containerfile.
fn containerfile_arg(containerfile: &str, name: &str) -> Option<String> {
    containerfile
        .lines()
        .filter_map(|l| l.trim().strip_prefix("ARG "))
        .filter_map(|a| a.split_once('='))
        .find(|(n, _)| n.trim() == name)
        .map(|(_, v)| v.trim().trim_matches('"').to_string())
}

/// The Containerfile labels its image as the script does: the version defaults to the
/// workspace's and the driver contract to wit/provider.wit's package, so a version or contract
/// bump that forgets the image fails here.
#[test]
fn the_containerfile_labels_the_version_and_the_driver_contract() {
    let path = wasm_ccm_deploy_tests::deploy_dir().join("image/Containerfile");
    let containerfile =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    assert_eq!(
        containerfile_arg(&containerfile, "VERSION").as_deref(),
        Some(env!("CARGO_PKG_VERSION")),
        "deploy/image/Containerfile: `ARG VERSION=` must default to the workspace version"
    );
    let contract = wasm_ccm_test_tools::contract::qualified().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        containerfile_arg(&containerfile, "DRIVER_CONTRACT").as_deref(),
        Some(contract.as_str()),
        "deploy/image/Containerfile: `ARG DRIVER_CONTRACT=` must default to wit/provider.wit's \
         package ({contract}); change it with the contract"
    );
    for (label, arg) in [
        ("org.opencontainers.image.version", "VERSION"),
        (CONTRACT_LABEL, "DRIVER_CONTRACT"),
    ] {
        assert!(
            containerfile.contains(&format!("{label}=\"${{{arg}}}\"")),
            "deploy/image/Containerfile: no label {label}=\"${{{arg}}}\""
        );
    }
}

/// The driver-contract label comes from wit/provider.wit: without a usable package line the
/// script stops before writing anything, naming the file (a copy of the script in a tree
/// whose wit/provider.wit has none).
#[test]
fn a_wit_file_without_a_package_line_is_refused() {
    let fx = Fixture::new();
    let tree = fx.path("repo");
    let image_dir = tree.join("deploy/image");
    std::fs::create_dir_all(&image_dir).expect("mkdir");
    std::fs::create_dir_all(tree.join("wit")).expect("mkdir");
    for file in ["build-oci-image.sh", "passwd", "group"] {
        std::fs::copy(
            wasm_ccm_deploy_tests::deploy_dir().join("image").join(file),
            image_dir.join(file),
        )
        .expect("copy the image files");
    }
    std::fs::copy(
        wasm_ccm_deploy_tests::deploy_dir().join("../Cargo.toml"),
        tree.join("Cargo.toml"),
    )
    .expect("copy Cargo.toml");
    let out = fx.path("oci");
    for (wit, says) in [
        (
            "interface types {}\n",
            "no 'package wasm-ccm:provider@X.Y.Z;' line",
        ),
        (
            "package wasm-ccm:provider@0.2;\n",
            "unexpected driver contract 'wasm-ccm:provider@0.2'",
        ),
    ] {
        std::fs::write(tree.join("wit/provider.wit"), wit).expect("write provider.wit");
        let output = Command::new("bash")
            .arg(image_dir.join("build-oci-image.sh"))
            .arg("--binary")
            .arg(&fx.binary)
            .arg("--ca-bundle")
            .arg(&fx.ca)
            .arg("--out")
            .arg(&out)
            .env("TMPDIR", fx.dir.path())
            .output()
            .expect("run the copied build-oci-image.sh");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "accepted {wit:?}: {stderr}");
        assert!(stderr.contains(says), "{wit:?}: {stderr}");
        assert!(
            stderr.contains("wit/provider.wit"),
            "names the file: {stderr}"
        );
        assert!(!out.exists(), "nothing written for {wit:?}");
    }
}
