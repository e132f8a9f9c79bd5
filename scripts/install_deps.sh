#!/usr/bin/env bash
# Installs what the project needs to build and test on Debian/Ubuntu (idempotent: does nothing
# when everything is present; non-interactive; as root, or through sudo). The CUDA toolkit is not
# installed here: with nvcc on PATH (or in /usr/local/cuda/bin) the build adds the CUDA backend,
# without it the build is host-only.
#
# C++ (required; the script fails without them): CMake >= 3.25, g++, make, Eigen, CLI11,
# nlohmann_json, Google Benchmark, GoogleTest, from apt.
# Python (optional: only the tests of scripts/ and of the CLI, tests/scripts and tests/apps, use
# them): pytest, matplotlib for plot_sweep.py's figures and scipy for fit_split_plan.py. From apt
# (python3-pytest, python3-matplotlib, python3-scipy) into the system Python; where that fails,
# into a project-local virtual environment, .venv/ (pip, scripts/requirements.txt; no pip into the
# system Python, which Debian 12 / Ubuntu 24.04 refuse: PEP 668). The tests' configure step
# (tests/CMakeLists.txt) finds whichever has them. Without them the script still succeeds, says
# so, and CTest reports the Python tests as skipped. MLA_REQUIRE_PYTHON_TOOLS=1 (CI; any value but
# empty or 0, as MLA_REQUIRE_CUDA) makes their absence an error instead.
#
# Another package manager at work (unattended upgrades on a fresh machine, a second install) holds
# apt's locks: apt-get waits for them, up to MLA_APT_LOCK_TIMEOUT seconds (600 by default), and
# says so while it waits.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
cmake_min="3.25"  # CMakeLists.txt's cmake_minimum_required, CMakePresets.json version 6

say() { echo "install_deps: $*"; }
warn() { echo "install_deps: warning: $*" >&2; }

sudo_cmd=""
if [ "$(id -u)" -ne 0 ]; then
  sudo_cmd="sudo"
fi
lock_timeout="${MLA_APT_LOCK_TIMEOUT:-600}"

# apt_get ARGS...: apt-get, non-interactive (env: sudo resets the environment, DEBIAN_FRONTEND
# would not reach apt-get), waiting up to $lock_timeout s for dpkg's lock (DPkg::Lock::Timeout).
apt_get() {
  $sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get -o "DPkg::Lock::Timeout=$lock_timeout" "$@"
}
# Reads apt-get's standard output and drops it, but for its "Waiting for cache lock: Could not get
# lock FILE. It is held by process N (NAME)..." lines (one a second while it waits): said once.
lock_notes() {
  local line said=0
  while IFS= read -r line; do
    case "$line" in
      *"Waiting for cache lock"*)
        if [ "$said" -eq 0 ]; then
          say "waiting up to ${lock_timeout}s for another package manager: ${line#*lock: }"
          said=1
        fi
        ;;
    esac
  done
}
# apt_update: apt-get update. It takes the package lists' lock without waiting (apt 2.6 fails at
# once, DPkg::Lock::Timeout notwithstanding): while it fails for that lock, it is run again every
# 5 s, up to $lock_timeout s.
apt_update() {
  local err rc deadline=$((SECONDS + lock_timeout)) said=0
  err="$(mktemp)"
  while :; do
    rc=0
    apt_get update -q 2>"$err" | lock_notes || rc=${PIPESTATUS[0]}
    if [ "$rc" -eq 0 ] || ! grep -q "Could not get lock" "$err" || [ "$SECONDS" -ge "$deadline" ]; then
      break
    fi
    if [ "$said" -eq 0 ]; then
      say "waiting up to ${lock_timeout}s for the package lists: $(grep -m1 "Could not get lock" "$err" | sed 's/^E: //')"
      said=1
    fi
    sleep 5
  done
  cat "$err" >&2
  rm -f "$err"
  return "$rc"
}
apt_updated=0
# apt_install [--no-install-recommends] PACKAGE...: non-interactive; returns apt-get's status.
apt_install() {
  if [ -n "$sudo_cmd" ] && ! command -v sudo >/dev/null 2>&1; then
    warn "not root and no sudo: cannot install ${*//--no-install-recommends/}"
    return 1
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    warn "no apt-get (not Debian/Ubuntu): cannot install ${*//--no-install-recommends/}"
    return 1
  fi
  if [ "$apt_updated" -eq 0 ]; then
    apt_update || warn "apt-get update failed; installing from the current package lists"
    apt_updated=1
  fi
  local rc=0
  apt_get install -y -q "$@" | lock_notes || rc=${PIPESTATUS[0]}
  return "$rc"
}

cmake_version() {  # the version of cmake on PATH, or nothing
  cmake --version 2>/dev/null | sed -n '1s/^cmake version \([0-9][0-9.]*\).*/\1/p' || true
}
version_at_least() {  # A B: A >= B
  [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]
}

# --- C++ toolchain and libraries (required) -------------------------------------------------------
packages=(g++ make libeigen3-dev libcli11-dev nlohmann-json3-dev libvalijson-dev libbenchmark-dev libgtest-dev googletest)
# The Python adapter backend (optional in a build; CI requires it): the interpreter's embedding files,
# pybind11, DLPack, and NumPy for host adapters.
packages+=(python3-dev pybind11-dev libdlpack-dev python3-numpy)
# cmake from apt unless the one on PATH is already recent enough (e.g. Kitware's, or a pip one).
current_cmake="$(cmake_version)"
if [ -z "$current_cmake" ] || ! version_at_least "$current_cmake" "$cmake_min"; then
  packages=(cmake "${packages[@]}")
fi
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]}"
  apt_install "${missing[@]}" || { echo "install_deps: error: could not install ${missing[*]}" >&2; exit 1; }
fi

# --- Python tools of scripts/ (optional) ----------------------------------------------------------
# The interpreters the tests' configure step looks at, in its order (tests/CMakeLists.txt).
venv="$root/.venv"
python_candidates() {
  local p
  for p in "$venv/bin/python3" "$(command -v python3 2>/dev/null || true)" /usr/bin/python3; do
    [ -n "$p" ] && [ -x "$p" ] && echo "$p"
  done
}
python_with() {  # MODULES: the first candidate that imports them all, or nothing
  local p
  while read -r p; do
    if "$p" -c "import $1" >/dev/null 2>&1; then echo "$p"; return 0; fi
  done < <(python_candidates)
  return 1
}

if ! python_with "pytest, matplotlib, scipy" >/dev/null; then
  # 1. apt, into the system Python (the versions may differ from requirements.txt's pins; the
  #    tests do not depend on them).
  say "installing python3-pytest python3-matplotlib python3-scipy (apt)"
  apt_install --no-install-recommends python3 python3-pytest python3-matplotlib python3-scipy \
    || warn "apt could not install python3-pytest python3-matplotlib python3-scipy"
fi
if ! python_with "pytest, matplotlib, scipy" >/dev/null; then
  # 2. A project-local virtual environment (sees the system's packages), pip from requirements.txt.
  base="$(command -v python3 2>/dev/null || true)"
  [ -n "$base" ] || base=/usr/bin/python3
  if [ ! -x "$base" ]; then
    warn "no python3 to make $venv with"
  else
    say "installing pytest, matplotlib, scipy into $venv (pip, scripts/requirements.txt)"
    if ! "$base" -m venv --system-site-packages "$venv" >/dev/null 2>&1; then
      # Debian/Ubuntu ship venv (ensurepip) as a package of its own.
      apt_install --no-install-recommends python3-venv >/dev/null 2>&1 || true
      "$base" -m venv --system-site-packages "$venv" >/dev/null 2>&1 || warn "$base cannot make a virtual environment"
    fi
    if [ -x "$venv/bin/python3" ]; then
      "$venv/bin/python3" -m pip install -q --disable-pip-version-check -r "$here/requirements.txt" \
        || warn "pip could not install scripts/requirements.txt into $venv"
    fi
  fi
fi
if python="$(python_with "pytest, matplotlib, scipy")"; then
  say "Python tools: $python (pytest, matplotlib, scipy)"
elif [ -n "${MLA_REQUIRE_PYTHON_TOOLS:-}" ] && [ "${MLA_REQUIRE_PYTHON_TOOLS}" != 0 ]; then
  # CI: the Python tests must run, not be skipped.
  echo "install_deps: error: no Python 3 with pytest, matplotlib and scipy (MLA_REQUIRE_PYTHON_TOOLS=1)" >&2
  exit 1
elif python="$(python_with pytest)"; then
  warn "no matplotlib or no scipy for $python: CTest skips plot_sweep.py's and fit_split_plan.py's" \
    "tests; everything else runs"
else
  warn "no Python 3 with pytest: CTest skips the Python tests (scripts.pytest, cli.pytest); the C++ build and tests are unaffected"
fi

# --- CMake version (checked last: everything else is installed by then) ---------------------------
current_cmake="$(cmake_version)"
if [ -z "$current_cmake" ] || ! version_at_least "$current_cmake" "$cmake_min"; then
  found="missing or not working"
  [ -z "$current_cmake" ] || found="$current_cmake ($(command -v cmake))"
  cat >&2 <<EOF
install_deps: error: CMake >= $cmake_min is required (CMakeLists.txt, CMakePresets.json version 6);
  cmake on PATH: $found.
  Ubuntu 22.04's apt has 3.22; Debian 12 (3.25) and Ubuntu 24.04 (3.28) are recent enough.
  Install a newer CMake and put it first on PATH, e.g.:
    - Kitware's APT repository: https://apt.kitware.com (then: apt-get install cmake)
    - python3 -m pip install --user 'cmake>=$cmake_min'   (installs into ~/.local/bin)
    - a binary release from https://cmake.org/download/
  then run scripts/install_deps.sh again.
EOF
  exit 1
fi
say "ok"
