#!/usr/bin/env bash
# Builds the wasm-ccm container image without a container daemon: writes an OCI image layout
# (oci-layout, index.json, blobs/sha256/...) whose single layer holds exactly what the final stage
# of ./Containerfile holds: the static musl binary, a CA bundle, /etc/passwd and /etc/group with
# the nonroot user 65532, and an empty /var/cache/wasm-ccm owned by that user. Its labels are the
# Containerfile's: the version from Cargo.toml's [workspace.package], the driver contract
# (io.wasm-ccm.driver-contract) from wit/provider.wit's package line.
#
# The output is reproducible: the same binary, CA bundle, tag and SOURCE_DATE_EPOCH give the same
# digests (tar entries sorted, owners, modes and times fixed; gzip without name or time).
#
# Push or load it with the usual tools, e.g.
#   skopeo copy oci:target/image/wasm-ccm-oci:0.1.0 docker://registry.example/wasm-ccm:0.1.0
#   podman load -i wasm-ccm.tar          (a file written with --archive)
#   docker load -i wasm-ccm.tar          (Docker 25 or later)
set -euo pipefail

readonly MUSL_TARGET=x86_64-unknown-linux-musl
readonly BIN_PATH=usr/local/bin/wasm-ccm
readonly CA_PATH=etc/ssl/certs/ca-certificates.crt
readonly CACHE_DIR=var/cache/wasm-ccm
readonly USER_ID=65532

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "$script_dir/../.." && pwd)

usage() {
    cat <<EOF
Usage: $(basename "$0") [options]

Writes the wasm-ccm image as an OCI image layout, with no container daemon.

Options:
  --binary PATH     put this wasm-ccm executable in the image instead of building one
                    (it should be statically linked: the image has no libc; build it from this
                    checkout: the io.wasm-ccm.driver-contract label is read from its
                    wit/provider.wit)
  --out DIR         the OCI layout directory (default: target/image/wasm-ccm-oci); an existing
                    layout there is replaced, any other non-empty directory is refused
  --tag TAG         the image's tag, index.json's org.opencontainers.image.ref.name
                    (default: the workspace version in Cargo.toml)
  --archive FILE    also write the layout as a tar archive, the form that
                    'skopeo copy oci-archive:FILE', 'podman load' and 'docker load' take
  --ca-bundle PATH  the CA bundle to ship (default: /etc/ssl/certs/ca-certificates.crt)
  -h, --help        show this help

Environment:
  SOURCE_DATE_EPOCH  the time stamped on files and in the config (default: 0)
  CARGO_TARGET_DIR   where cargo builds when no --binary is given (default: target/)
EOF
}

die() {
    printf 'build-oci-image: error: %s\n' "$*" >&2
    exit 1
}

warn() {
    printf 'build-oci-image: warning: %s\n' "$*" >&2
}

note() {
    printf 'build-oci-image: %s\n' "$*" >&2
}

# An absolute form of a path, for paths used after a change of directory.
absolute() {
    case $1 in
        /*) printf '%s\n' "$1" ;;
        *) printf '%s/%s\n' "$PWD" "$1" ;;
    esac
}

# A JSON string literal. Only printable ASCII reaches here (checked by the callers), so escaping
# the backslash and the double quote is enough.
json_str() {
    local s=$1
    s=${s//\\/\\\\}
    s=${s//\"/\\\"}
    printf '"%s"' "$s"
}

sha256_of() {
    local sum
    sum=$(sha256sum "$1")
    printf '%s\n' "${sum%% *}"
}

size_of() {
    wc -c <"$1" | tr -d ' '
}

# Moves a finished file into blobs/sha256/ under its digest; prints the digest's hex.
add_blob() {
    local file=$1 layout=$2 hex
    hex=$(sha256_of "$file")
    mv -f "$file" "$layout/blobs/sha256/$hex"
    printf '%s\n' "$hex"
}

binary=""
out=""
tag=""
archive=""
ca_bundle=/etc/ssl/certs/ca-certificates.crt

while (($# > 0)); do
    case $1 in
        -h | --help)
            usage
            exit 0
            ;;
        --binary | --out | --tag | --archive | --ca-bundle)
            (($# >= 2)) || die "$1 needs a value (see --help)"
            case $1 in
                --binary) binary=$2 ;;
                --out) out=$2 ;;
                --tag) tag=$2 ;;
                --archive) archive=$2 ;;
                --ca-bundle) ca_bundle=$2 ;;
            esac
            shift 2
            ;;
        --binary=* | --out=* | --tag=* | --archive=* | --ca-bundle=*)
            value=${1#*=}
            case $1 in
                --binary=*) binary=$value ;;
                --out=*) out=$value ;;
                --tag=*) tag=$value ;;
                --archive=*) archive=$value ;;
                --ca-bundle=*) ca_bundle=$value ;;
            esac
            shift
            ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done

# --- Check every input before anything is written. ---------------------------------------------

command -v sha256sum >/dev/null || die "sha256sum not found (GNU coreutils)"
command -v gzip >/dev/null || die "gzip not found"
# (grep without -q reads all its input: with pipefail, -q could fail the pipeline by SIGPIPE.)
tar --version 2>/dev/null | grep 'GNU tar' >/dev/null || die "GNU tar is needed (--sort=name, --mtime)"

# The workspace's [workspace.package] version and repository, for the default tag and labels.
workspace_field() {
    awk -v key="$1" '
        /^\[/ { section = $0 }
        section == "[workspace.package]" && $1 == key && $2 == "=" {
            value = $3; gsub(/"/, "", value); print value; exit
        }' "$repo_root/Cargo.toml"
}
version=$(workspace_field version)
source_url=$(workspace_field repository)
[[ -n $version ]] || die "no version in [workspace.package] of $repo_root/Cargo.toml"
[[ $version =~ ^[0-9A-Za-z.+-]+$ ]] || die "unexpected workspace version '$version'"
[[ $source_url =~ ^[[:graph:]]*$ ]] || die "unexpected workspace repository '$source_url'"

# The driver contract the binary implements, for the io.wasm-ccm.driver-contract label: the
# package line of wit/provider.wit (`package wasm-ccm:provider@X.Y.Z;`), as the host's build reads it.
readonly WIT_FILE=$repo_root/wit/provider.wit
[[ -r $WIT_FILE ]] || die "cannot read $WIT_FILE (the driver contract's version is read from it)"
contract=$(sed -n 's/^[[:space:]]*package[[:space:]]\{1,\}\(wasm-ccm:provider@[^;[:space:]]*\)[[:space:]]*;.*$/\1/p' "$WIT_FILE")
[[ -n $contract ]] || die "no 'package wasm-ccm:provider@X.Y.Z;' line in $WIT_FILE"
[[ $contract =~ ^wasm-ccm:provider@[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.+-]+)?$ ]] ||
    die "unexpected driver contract '$contract' in $WIT_FILE (one package line, version X.Y.Z)"

tag=${tag:-$version}
# The tag grammar of the OCI distribution spec.
[[ $tag =~ ^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$ ]] ||
    die "--tag '$tag' is not a valid tag (letters, digits, '_', '.', '-'; at most 128; not starting with '.' or '-')"

epoch=${SOURCE_DATE_EPOCH:-0}
[[ $epoch =~ ^[0-9]+$ ]] || die "SOURCE_DATE_EPOCH '$epoch' is not a number of seconds"
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ) || die "cannot format SOURCE_DATE_EPOCH $epoch"

[[ -e $ca_bundle ]] ||
    die "CA bundle $ca_bundle not found (install Debian's ca-certificates, or pass --ca-bundle PATH)"
[[ -f $ca_bundle && -r $ca_bundle ]] || die "CA bundle $ca_bundle is not a readable file"
[[ -s $ca_bundle ]] || die "CA bundle $ca_bundle is empty"

if [[ -n $binary ]]; then
    [[ -e $binary ]] || die "--binary $binary: no such file"
    [[ -f $binary && -r $binary ]] || die "--binary $binary: not a readable regular file"
    [[ -s $binary ]] || die "--binary $binary: the file is empty"
fi

out=$(absolute "${out:-$repo_root/target/image/wasm-ccm-oci}")
out=${out%/}
[[ -n $out ]] || die "--out / is not a place for an image layout"
if [[ -e $out || -L $out ]]; then
    [[ -d $out && ! -L $out ]] || die "--out $out exists and is not a directory"
    # Only a previous layout (or nothing) is ever replaced, never an unrelated directory.
    if [[ ! -f $out/oci-layout ]] && [[ -n $(ls -A "$out") ]]; then
        die "--out $out is a non-empty directory without an oci-layout file; refusing to replace it"
    fi
fi
if [[ -n $archive ]]; then
    archive=$(absolute "$archive")
    [[ ! -d $archive ]] || die "--archive $archive is a directory; give a file name"
    case $archive in
        "$out" | "$out"/*) die "--archive $archive must not be inside --out $out" ;;
    esac
fi

# --- The binary. ---------------------------------------------------------------------------------

# Whether a file is an ELF executable with no program interpreter (static or static-pie).
static_elf() {
    local f=$1 magic
    magic=$(head -c 4 "$f" | od -An -tx1 | tr -d ' \n')
    [[ $magic == 7f454c46 ]] || return 1
    local headers
    if command -v readelf >/dev/null; then
        headers=$(readelf -lW "$f" 2>/dev/null) || return 1
        [[ $headers != *INTERP* ]]
    elif command -v file >/dev/null; then
        headers=$(file -b "$f")
        [[ $headers != *interpreter* && $headers != *dynamically* ]]
    else
        return 0
    fi
}

build_binary() {
    command -v cargo >/dev/null || die "cargo not found; install Rust (rustup) or pass --binary PATH"
    cd "$repo_root"
    if command -v rustup >/dev/null; then
        # Run here so the toolchain of rust-toolchain.toml is the one that gets the target.
        if ! rustup target list --installed | grep -x "$MUSL_TARGET" >/dev/null; then
            note "adding the Rust target $MUSL_TARGET"
            rustup target add "$MUSL_TARGET" >&2
        fi
    fi
    if ! command -v musl-gcc >/dev/null; then
        if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
            note "musl-gcc not found; installing Debian's musl-tools"
            # Progress to stderr: stdout is only the summary at the end.
            apt-get update -qq >&2
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends musl-tools >&2
        else
            die "musl-gcc not found: install musl-tools (Debian/Ubuntu: sudo apt-get install musl-tools), or pass --binary PATH"
        fi
    fi
    # ring (rustls' crypto) compiles C and assembly for the target; musl-gcc is its compiler.
    export CC_x86_64_unknown_linux_musl="${CC_x86_64_unknown_linux_musl:-musl-gcc}"
    export CARGO_TARGET_DIR="$target_dir"
    note "cargo build --release --locked -p wasm-ccm --target $MUSL_TARGET (target dir $target_dir)"
    cargo build --release --locked -p wasm-ccm --target "$MUSL_TARGET" >&2
}

built_here=false
if [[ -n $binary ]]; then
    if ! static_elf "$binary"; then
        warn "$binary is not a statically linked ELF executable; the image has no libc, so it will not run there"
    fi
else
    # Resolved before the build changes directory, so a relative CARGO_TARGET_DIR means the same.
    target_dir=$(absolute "${CARGO_TARGET_DIR:-$repo_root/target}")
    (build_binary)
    binary="$target_dir/$MUSL_TARGET/release/wasm-ccm"
    [[ -f $binary ]] || die "cargo finished but $binary is missing"
    static_elf "$binary" || die "$binary is not a statically linked ELF executable"
    built_here=true
fi

# --- The layer. --------------------------------------------------------------------------------

work=$(mktemp -d "${TMPDIR:-/tmp}/wasm-ccm-oci.XXXXXX")
staging=""
cleanup() {
    rm -rf "$work"
    if [[ -n $staging ]]; then rm -rf "$staging"; fi
}
trap cleanup EXIT

rootfs=$work/rootfs
mkdir -p "$rootfs/${BIN_PATH%/*}" "$rootfs/${CA_PATH%/*}" "$rootfs/$CACHE_DIR"
cp "$binary" "$rootfs/$BIN_PATH"
if $built_here; then
    # Built here: drop the symbol table (the release profile keeps it); --binary is used as given.
    command -v strip >/dev/null || die "strip not found (binutils)"
    strip "$rootfs/$BIN_PATH"
fi
cp "$ca_bundle" "$rootfs/$CA_PATH"
cp "$script_dir/passwd" "$rootfs/etc/passwd"
cp "$script_dir/group" "$rootfs/etc/group"
find "$rootfs" -type d -exec chmod 0755 {} +
find "$rootfs" -type f -exec chmod 0644 {} +
chmod 0755 "$rootfs/$BIN_PATH"

# Every entry named, parents first, in name order; root owns all but the cache directory.
tar_common=(--format=ustar --no-recursion --numeric-owner --mtime="@$epoch"
    --no-acls --no-xattrs --no-selinux -C "$rootfs")
tar "${tar_common[@]}" --owner=0 --group=0 -cf "$work/layer.tar" \
    etc etc/group etc/passwd etc/ssl etc/ssl/certs "$CA_PATH" \
    usr usr/local usr/local/bin "$BIN_PATH" \
    var var/cache
tar "${tar_common[@]}" --owner="$USER_ID" --group="$USER_ID" -rf "$work/layer.tar" "$CACHE_DIR"

diff_id=$(sha256_of "$work/layer.tar")
layer_size_tar=$(size_of "$work/layer.tar")
gzip -n -9 -c "$work/layer.tar" >"$work/layer.tar.gz"
layer_size_gz=$(size_of "$work/layer.tar.gz")
binary_size=$(size_of "$rootfs/$BIN_PATH")

# --- The layout, written next to --out and moved into place when complete. ----------------------

mkdir -p "$(dirname "$out")"
staging=$(mktemp -d "$out.tmp.XXXXXX")
chmod 0755 "$staging"
mkdir -p "$staging/blobs/sha256"

layer_hex=$(add_blob "$work/layer.tar.gz" "$staging")

description="A Kubernetes cloud-controller-manager whose cloud drivers are sandboxed WebAssembly components, mounted at run time (the image holds no driver)."
labels="{$(json_str org.opencontainers.image.title):$(json_str wasm-ccm)"
labels+=",$(json_str org.opencontainers.image.description):$(json_str "$description")"
labels+=",$(json_str org.opencontainers.image.source):$(json_str "$source_url")"
labels+=",$(json_str org.opencontainers.image.licenses):$(json_str Apache-2.0)"
labels+=",$(json_str org.opencontainers.image.version):$(json_str "$version")"
labels+=",$(json_str io.wasm-ccm.driver-contract):$(json_str "$contract")}"

env_json="[$(json_str PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)"
env_json+=",$(json_str "WASM_CCM_CACHE_DIR=/$CACHE_DIR")]"

printf '%s' "{\"created\":$(json_str "$created"),\"architecture\":\"amd64\",\"os\":\"linux\"" \
    ",\"config\":{\"User\":\"$USER_ID:$USER_ID\",\"Env\":$env_json" \
    ",\"Entrypoint\":[$(json_str "/$BIN_PATH")],\"Cmd\":[\"--help\"],\"WorkingDir\":\"/\"" \
    ",\"Labels\":$labels}" \
    ",\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"sha256:$diff_id\"]}" \
    ",\"history\":[{\"created\":$(json_str "$created")" \
    ",\"created_by\":\"deploy/image/build-oci-image.sh\"" \
    ",\"comment\":\"wasm-ccm, CA bundle, passwd/group, /$CACHE_DIR\"}]}" \
    >"$work/config.json"
config_size=$(size_of "$work/config.json")
config_hex=$(add_blob "$work/config.json" "$staging")

printf '%s' "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\"" \
    ",\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\"" \
    ",\"digest\":\"sha256:$config_hex\",\"size\":$config_size}" \
    ",\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\"" \
    ",\"digest\":\"sha256:$layer_hex\",\"size\":$layer_size_gz}]" \
    ",\"annotations\":{\"org.opencontainers.image.created\":$(json_str "$created")}}" \
    >"$work/manifest.json"
manifest_size=$(size_of "$work/manifest.json")
manifest_hex=$(add_blob "$work/manifest.json" "$staging")

printf '%s' "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\"" \
    ",\"manifests\":[{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\"" \
    ",\"digest\":\"sha256:$manifest_hex\",\"size\":$manifest_size" \
    ",\"platform\":{\"architecture\":\"amd64\",\"os\":\"linux\"}" \
    ",\"annotations\":{\"org.opencontainers.image.ref.name\":$(json_str "$tag")" \
    ",\"io.containerd.image.name\":$(json_str "wasm-ccm:$tag")}}]}" \
    >"$staging/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' >"$staging/oci-layout"
chmod 0755 "$staging/blobs" "$staging/blobs/sha256"
chmod 0644 "$staging/oci-layout" "$staging/index.json" "$staging"/blobs/sha256/*

rm -rf "$out"
mv "$staging" "$out"
staging=""

if [[ -n $archive ]]; then
    mkdir -p "$(dirname "$archive")"
    tar --format=ustar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner \
        --no-acls --no-xattrs --no-selinux -C "$out" \
        -cf "$work/archive.tar" oci-layout index.json blobs
    mv -f "$work/archive.tar" "$archive"
fi

human() {
    awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'
}

echo "image:              $out (tag $tag)"
if [[ -n $archive ]]; then
    echo "archive:            $archive"
fi
echo "manifest digest:    sha256:$manifest_hex"
echo "config digest:      sha256:$config_hex"
echo "binary:             $binary_size bytes ($(human "$binary_size"))"
echo "compressed size:    $layer_size_gz bytes ($(human "$layer_size_gz")), 1 layer"
echo "uncompressed size:  $layer_size_tar bytes ($(human "$layer_size_tar"))"
