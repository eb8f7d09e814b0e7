#!/usr/bin/env bash
# Installs every Debian package that building and testing strata needs. Idempotent; run as root
# (or with sudo) on Debian 12. `--train` adds what tools/train (the small model's training
# script) needs and nothing else does.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  ccache                        # compiler cache: CI and rebuilds reuse earlier objects
  clang libclang-rt-14-dev      # libFuzzer + sanitizers for the fuzz targets
  clang-format
  libfmt-dev libcli11-dev nlohmann-json3-dev
  libpcre2-dev libutf8proc-dev   # tokenizer: pre-tokenizer regexes (lookahead), NFC
  libcpp-httplib-dev            # server: HTTP/1.1 (a shared library in Debian)
  libgtest-dev libgmock-dev libbenchmark-dev
  libvulkan-dev glslc           # GPU backend: Vulkan headers + loader, GLSL -> SPIR-V compiler
  mesa-vulkan-drivers           # lavapipe: a Vulkan driver on the CPU, so the GPU tests run anywhere
  curl                          # server tests that speak HTTP from the shell
  chromium                      # the server's web page, tested in a real (headless) browser
  systemd                       # systemd-analyze verify checks `strata service install`'s unit
  python3 python3-jsonschema    # an independent JSON-schema validator for constrained outputs
  openmpi-bin libopenmpi-dev    # --distributed: one model's layers split across MPI ranks
  haproxy                       # deploy/haproxy: replicas behind a load balancer (tested in CI)
)

# tools/train: PyTorch and NumPy; OpenBLAS (Debian's torch uses whatever libblas.so.3 points to:
# the reference BLAS runs a 2048x2048 matmul at ~5 GFLOP/s on 2 cores, OpenBLAS at ~170); `regex`
# for the Qwen2 pre-tokenizer's \p{L}; Jinja2 for Qwen3's chat template; Python 3.11's standard
# library, which is the training data.
if [[ ${1:-} == --train ]]; then
  packages+=(python3-torch python3-numpy libopenblas0-pthread python3-regex python3-jinja2
    libpython3.11-stdlib)
elif [[ $# -gt 0 ]]; then
  echo "usage: scripts/setup.sh [--train]" >&2
  exit 2
fi

# Node.js + npm run the interoperability tests (an independent GGUF reader from npm). Machines
# that already have them from another source keep theirs (mixing would conflict).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "setup: all ${#packages[@]} packages already installed"
fi
