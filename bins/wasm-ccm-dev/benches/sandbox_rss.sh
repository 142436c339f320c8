#!/usr/bin/env bash
# Host peak RSS under the sandbox review's memory attacks: each attack runs in its own
# `wasm-ccm-dev call` process against the hostile test driver, and the process's maximum resident set
# size is read from the kernel (getrusage of the child). Prints a Markdown table for BENCHMARKS.md.
#
#   bins/wasm-ccm-dev/benches/sandbox_rss.sh [path/to/wasm-ccm-dev] [memory-limit]
#
# Build first (`cargo build -p wasm-ccm-dev`); the hostile driver is built by any cargo build.
set -euo pipefail
cd "$(dirname "$0")/../../.."
BIN=${1:-target/debug/wasm-ccm-dev}
LIMIT=${2:-64Mi}
DRIVER=target/guest/wasm32-wasip2/guest/hostile_driver.wasm
[ -x "$BIN" ] || { echo "no $BIN: cargo build -p wasm-ccm-dev first" >&2; exit 1; }
[ -f "$DRIVER" ] || { echo "no $DRIVER: cargo build first" >&2; exit 1; }
CACHE=$(mktemp -d)
trap 'rm -rf "$CACHE"' EXIT

rss() { # name, annotations JSON [, driver, function, extra flag] → "max RSS KiB|outcome"
    python3 - "$BIN" "${3:-$DRIVER}" "$LIMIT" "$CACHE" "$1" "$2" "${4:-instances.instance-metadata}" ${5:-} <<'PY'
import json, resource, subprocess, sys
binary, driver, limit, cache, name, annotations, function, *extra = sys.argv[1:]
node = {"name": name, "annotations": json.loads(annotations)}
p = subprocess.run([binary, "call", driver, function, "--input", json.dumps(node),
                    "--memory-limit", limit, "--cache-dir", cache, *extra],
                   capture_output=True, text=True)
kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
out = (p.stdout + p.stderr).strip().splitlines()
first = next((l for l in out if l.startswith("wasm-ccm-dev:")), next((l for l in out if l.strip()), ""))
first = first.removeprefix("wasm-ccm-dev: ").replace("driver hostile ", "")
verdict = "ok" if p.returncode == 0 else f"exit {p.returncode}: {first[:90]}"
print(f"{kib}|{verdict}")
PY
}

echo "| attack | input | host max RSS (MiB) | outcome |"
echo "| --- | --- | ---: | --- |"
while IFS='|' read -r name annotations label; do
    IFS='|' read -r kib verdict < <(rss "$name" "$annotations")
    printf '| %s | %s | %.1f | %s |\n' "$label" "$name $annotations" "$(awk -v k="$kib" 'BEGIN{print k/1024}')" "${verdict//|//}"
done <<'LIST'
ok|[]|baseline (a normal call)
grow|[]|memory bomb (1 MiB chunks until the limit)
redact-flood|[["n","2000"],["kb","4"]]|2,000 redact() of 4 KiB
redact-flood|[["n","200"],["kb","1024"]]|200 redact() of 1 MiB (refused: over 4 KiB)
log-big|[["fields","1000"],["kb","8"]]|one log record: 64 KiB message, 1,000 fields of 8 KiB
amplify|[["n","120"],["kb","1024"]]|120 addresses aliasing one 1 MiB buffer
amplify|[["n","12"],["kb","1024"]]|12 addresses aliasing one 1 MiB buffer (under the fuel)
many-addresses|[["n","600000"]]|600,000 addresses
LIST
# The hand-written component with eight memories (drivers/build/multi_memory.rs): the pooling
# allocator refuses it at compile time, so it runs on demand, as the review ran it.
BOMB=target/guest/multi_memory_driver.wasm
IFS='|' read -r kib verdict < <(rss n1 '[]' "$BOMB" instances.instance-exists --allocation=on-demand)
printf '| %s | %s | %.1f | %s |\n' "8 memories, 7 grown by 63 MiB each (on-demand allocator)" "multi_memory_driver instance-exists" "$(awk -v k="$kib" 'BEGIN{print k/1024}')" "${verdict//|//}"
