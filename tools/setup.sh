#!/usr/bin/env bash
# Installs what folio needs to build and test, and only what is missing.
# Idempotent: a second run installs nothing and takes about a second.
set -euo pipefail

debian_packages=(
  build-essential cmake pkg-config
  libgtest-dev
  nlohmann-json3-dev libcli11-dev libtomlplusplus-dev
  libssl-dev libhwy-dev
  libpcre2-dev
  zlib1g-dev  # CRC-32 of KV snapshots
  libcpp-httplib-dev
  # the Python extension's headers, and pip for the packages below
  python3-dev python3-pip
  # libFuzzer for make fuzz and the format_fuzz_descriptor test
  clang libclang-rt-dev
  clang-format  # make format, make format-check
)

missing=()
for pkg in "${debian_packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Python packages: nanobind for the `folio` extension the build makes
# (python/), and the tests that check folio against implementations it did
# not write (tests/python). Installed only when an import, nanobind's
# version range or the pinned tokenizers version is missing.
if ! python3 - <<'PY' 2>/dev/null
import sys
import numpy, gguf, pytest, tokenizers, nanobind
nb = tuple(int(x) for x in nanobind.__version__.split(".")[:2])
sys.exit(tokenizers.__version__ != "0.23.3" or not (2, 4) <= nb < (4, 0))
PY
then
  echo "setup: installing python test packages (tools/requirements-test.txt)"
  python3 -m pip install --quiet -r "$(dirname "$0")/requirements-test.txt"
fi
