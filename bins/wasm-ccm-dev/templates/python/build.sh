#!/bin/sh
# Builds the {{name}} driver into build/{{crate}}.wasm: ./build.sh
#
# componentize-py, pinned in wasm-ccm/sdk/python/requirements-build.txt, is installed into a venv
# in .tools/ on the first run (needs python3 with venv, and PyPI once). COMPONENTIZE_PY=path uses
# one you already have (a venv's bin/componentize-py; its bin/pip installs the dependencies).
set -eu
cd "$(dirname "$0")"
# componentize-py imports the sources at build time; keep the tree free of bytecode.
export PYTHONDONTWRITEBYTECODE=1
if [ -z "${COMPONENTIZE_PY:-}" ]; then
  if [ ! -x .tools/bin/componentize-py ]; then
    rm -rf .tools
    "${PYTHON:-python3}" -m venv .tools
    .tools/bin/pip install -q --disable-pip-version-check \
      -r wasm-ccm/sdk/python/requirements-build.txt
  fi
  COMPONENTIZE_PY=.tools/bin/componentize-py
fi
PIP="$(dirname "$COMPONENTIZE_PY")/pip"

# The driver's own dependencies (requirements.txt), as pure Python: C extensions cannot load in
# the component. Reinstalled only when requirements.txt changes.
mkdir -p build
if [ ! -f build/deps/.complete ] || [ requirements.txt -nt build/deps/.complete ]; then
  rm -rf build/deps
  mkdir -p build/deps
  if grep -q '^[[:space:]]*[^#[:space:]]' requirements.txt; then
    "$PIP" install -q --disable-pip-version-check --no-compile --target build/deps \
      -r requirements.txt
    find build/deps -name '*.so' -delete
  fi
  touch build/deps/.complete
fi

"$COMPONENTIZE_PY" -q -d wasm-ccm/wit -w instances-driver componentize app \
  -p src -p wasm-ccm/sdk/python -p build/deps -o build/{{crate}}.wasm
echo "built build/{{crate}}.wasm"
