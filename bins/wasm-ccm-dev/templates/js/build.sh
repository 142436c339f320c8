#!/bin/sh
# Builds the {{name}} driver into build/{{crate}}.wasm: ./build.sh (or npm run build)
#
# jco, pinned in package.json, comes from `npm install`, run here when node_modules is missing or
# older than package.json (needs node >= 20.19 with npm, and the npm registry once). JCO=path
# uses a jco you already have (then only the dependencies of package.json are installed).
set -eu
cd "$(dirname "$0")"
if [ -z "${JCO:-}" ]; then
  if [ ! -x node_modules/.bin/jco ] || [ package.json -nt node_modules/.package-lock.json ]; then
    npm install --no-audit --no-fund --loglevel=error
  fi
  JCO=node_modules/.bin/jco
elif grep -q '"dependencies"' package.json && [ ! -d node_modules ]; then
  npm install --omit=dev --no-audit --no-fund --loglevel=error
fi
mkdir -p build
# --disable http fetch-event: without it the component imports wasi:http, which the host refuses
# (drivers reach the network only through wasm-ccm:provider/http, where egress is checked).
# The bundle config marks the wasm-ccm: imports as provided by the host.
"$JCO" componentize src/driver.js --wit wasm-ccm/wit -n instances-driver \
  --disable http fetch-event --bundle --bundle-config wasm-ccm/sdk/js/bundle.config.mjs \
  -o build/{{crate}}.wasm
echo "built build/{{crate}}.wasm"
