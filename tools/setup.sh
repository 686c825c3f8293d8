#!/usr/bin/env bash
# Installs what folio needs to build and test, and only what is missing.
# Idempotent: a second run installs nothing and takes about a second.
set -euo pipefail

debian_packages=(
  build-essential cmake pkg-config
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libtomlplusplus-dev
  libssl-dev libhwy-dev
  libpcre2-dev
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

# Python: Hugging Face `tokenizers`, pinned, for the tokenizer fixture
# generator (tests/python/make_tokenizer_fixture.py) and
# tools/gen_unicode_tables.py. The C++ tests read checked-in fixtures and
# never need it, so a failed install only warns.
tokenizers_version=0.23.3
if ! python3 -c "import sys, tokenizers; sys.exit(tokenizers.__version__ != '${tokenizers_version}')" 2>/dev/null; then
  echo "setup: installing python tokenizers==${tokenizers_version}"
  python3 -m pip install --quiet "tokenizers==${tokenizers_version}" ||
    echo "setup: warning: could not install tokenizers (needed only to regenerate tokenizer fixtures)"
fi
