#!/usr/bin/env bash
# Installs what the project needs to build and test on Debian/Ubuntu (idempotent: does nothing
# when everything is present). The CUDA toolkit is not installed here: with nvcc on PATH (or in
# /usr/local/cuda/bin) the build adds the CUDA backend, without it the build is host-only.
set -euo pipefail

packages=(cmake g++ make libeigen3-dev libcli11-dev nlohmann-json3-dev libbenchmark-dev libgtest-dev googletest)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  echo "install_deps: installing ${missing[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Python tools of scripts/ (matplotlib for plot_sweep.py, pytest for their tests).
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if ! python3 -c 'import pytest, matplotlib' >/dev/null 2>&1; then
  python3 -m pip install -q -r "$here/requirements.txt"
fi
echo "install_deps: ok"
