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
.venv/bin/python -m pip install -q -e '.[all,train,verl,ray,browser]'
.venv/bin/python -m pip install -q --no-deps 'verl==0.9.1'
# ms-swift 4.x for the plugin test, kept out of the venv (it pins trl<1 and transformers<5.20):
# it and the few packages its reward path imports go into .swift-deps, which only that test's
# subprocess puts on PYTHONPATH.
[ -d .swift-deps/swift/rewards ] || .venv/bin/python -m pip install -q --no-deps --target .swift-deps \
  'ms-swift==4.6.0' 'modelscope>=1.23' modelscope-hub 'peft>=0.11,<0.21' json-repair msgspec dacite

# System packages some tests use (Debian): headless Chromium for the HTML report, a CJK font
# and Tesseract for OCR, Redis for the shared tool cache. Tests skip with a reason without them.
apt_packages=()
command -v chromium >/dev/null 2>&1 || apt_packages+=(chromium)
command -v tesseract >/dev/null 2>&1 || apt_packages+=(tesseract-ocr)
command -v redis-server >/dev/null 2>&1 || apt_packages+=(redis-server)
fc-list 2>/dev/null | grep -qi "wenquanyi" || apt_packages+=(fonts-wqy-microhei)
if [ ${#apt_packages[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_packages[@]}" >/dev/null) \
      || echo "warning: could not install ${apt_packages[*]}; the tests that need them will be skipped" >&2
  else
    echo "warning: ${apt_packages[*]} missing and no root to install them; dependent tests will be skipped" >&2
  fi
fi

# Build the offline gazetteer once, up front, so its one-time cost is not charged to a test.
.venv/bin/geosleuth gazetteer build >/dev/null

exec .venv/bin/python -m pytest -m "slow or not slow" "$@"
