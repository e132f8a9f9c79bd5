"""scripts/install_deps.sh without touching the system: a copy of the script runs with stubs of
apt-get, dpkg, sudo, sleep, cmake and python3 first on PATH, so what is tested is how it calls
apt-get (the lock timeout on every call) and how it waits for a lock another package manager holds."""
import os
import pathlib
import shutil
import stat
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# apt-get: records its arguments; `update` fails for the lists' lock FAKE_LISTS_LOCKED times
# (apt 2.6's message), then succeeds; `install` prints apt's waiting lines when FAKE_DPKG_LOCKED
# is set, and fails for the lock when it is "forever".
STUBS = {
    "apt-get": r"""#!/usr/bin/env bash
echo "$*" >>"$FAKE_LOG"
if [[ " $* " == *" update "* ]]; then
  n=$(cat "$FAKE_DIR/updates" 2>/dev/null || echo 0)
  echo $((n + 1)) >"$FAKE_DIR/updates"
  if (( n < ${FAKE_LISTS_LOCKED:-0} )); then
    echo "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (apt-get)" >&2
    echo "E: Unable to lock directory /var/lib/apt/lists/" >&2
    exit 100
  fi
  echo "Reading package lists..."
  exit 0
fi
if [[ -n "${FAKE_DPKG_LOCKED:-}" ]]; then
  for i in 1 2 3; do
    echo "Waiting for cache lock: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4343 (unattended-upgr)..."
  done
  if [[ "$FAKE_DPKG_LOCKED" == forever ]]; then
    echo "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4343 (unattended-upgr)" >&2
    exit 100
  fi
fi
echo "Reading package lists..."
echo "Setting up something ..."
""",
    # dpkg -s PACKAGE: installed unless listed in FAKE_MISSING.
    "dpkg": '#!/usr/bin/env bash\n[[ " $FAKE_MISSING " != *" $2 "* ]]\n',
    "sudo": '#!/usr/bin/env bash\nexec "$@"\n',
    "sleep": '#!/usr/bin/env bash\necho "sleep $*" >>"$FAKE_LOG"\n',
    "cmake": '#!/usr/bin/env bash\necho "cmake version 3.28.1"\n',
    "python3": "#!/usr/bin/env bash\nexit 0\n",  # "imports" pytest and matplotlib
}


def write_exe(path, text):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture
def fake(tmp_path):
    (tmp_path / "scripts").mkdir()
    for name in ("install_deps.sh", "requirements.txt"):
        shutil.copy(ROOT / "scripts" / name, tmp_path / "scripts" / name)
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    for name, text in STUBS.items():
        write_exe(stubs / name, text)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLA_", "FAKE_"))}
    env.update(PATH=f"{stubs}:{env['PATH']}", FAKE_LOG=str(tmp_path / "log.txt"), FAKE_DIR=str(tmp_path))
    return tmp_path, env


def run(fake, **extra):
    tmp_path, env = fake
    proc = subprocess.run(["bash", str(tmp_path / "scripts" / "install_deps.sh")], env=dict(env, **extra),
                          capture_output=True, text=True, timeout=60)
    log = tmp_path / "log.txt"
    calls = log.read_text().splitlines() if log.exists() else []
    return proc, [c for c in calls if not c.startswith("sleep ")], [c for c in calls if c.startswith("sleep ")]


def test_nothing_missing_calls_no_apt_get(fake):
    proc, apt_calls, _ = run(fake)
    assert proc.returncode == 0, proc.stderr
    assert apt_calls == []
    assert "install_deps: ok" in proc.stdout


def test_every_apt_get_call_carries_the_lock_timeout(fake):
    proc, apt_calls, _ = run(fake, FAKE_MISSING="libcli11-dev googletest")
    assert proc.returncode == 0, proc.stderr
    assert [c.split()[2] for c in apt_calls] == ["update", "install"]
    assert all(c.startswith("-o DPkg::Lock::Timeout=600 ") for c in apt_calls), apt_calls
    assert apt_calls[1].endswith(" libcli11-dev googletest")
    proc, apt_calls, _ = run(fake, FAKE_MISSING="make", MLA_APT_LOCK_TIMEOUT="42")
    assert all(c.startswith("-o DPkg::Lock::Timeout=42 ") for c in apt_calls[2:]), apt_calls


def test_update_waits_while_another_apt_holds_the_lists_lock(fake):
    proc, apt_calls, sleeps = run(fake, FAKE_MISSING="make", FAKE_LISTS_LOCKED="3")
    assert proc.returncode == 0, proc.stderr
    assert [c.split()[2] for c in apt_calls] == ["update"] * 4 + ["install"]
    assert len(sleeps) == 3
    waiting = [l for l in proc.stdout.splitlines() if "waiting" in l]
    assert waiting == ["install_deps: waiting up to 600s for the package lists: Could not get lock "
                       "/var/lib/apt/lists/lock. It is held by process 4242 (apt-get)"]
    assert "apt-get update failed" not in proc.stderr


def test_update_gives_up_at_the_timeout_and_installs_from_the_current_lists(fake):
    proc, apt_calls, sleeps = run(fake, FAKE_MISSING="make", FAKE_LISTS_LOCKED="99", MLA_APT_LOCK_TIMEOUT="0")
    assert proc.returncode == 0, proc.stderr
    assert [c.split()[2] for c in apt_calls] == ["update", "install"]
    assert sleeps == []
    assert "Could not get lock /var/lib/apt/lists/lock" in proc.stderr
    assert "apt-get update failed; installing from the current package lists" in proc.stderr


def test_install_says_once_that_it_waits_for_dpkgs_lock(fake):
    proc, _, _ = run(fake, FAKE_MISSING="make", FAKE_DPKG_LOCKED="1")
    assert proc.returncode == 0, proc.stderr
    waiting = [l for l in proc.stdout.splitlines() if "waiting" in l]
    assert waiting == ["install_deps: waiting up to 600s for another package manager: Could not get lock "
                       "/var/lib/dpkg/lock-frontend. It is held by process 4343 (unattended-upgr)..."]
    assert "Setting up" not in proc.stdout  # apt-get's own output stays quiet


def test_a_lock_held_past_the_timeout_fails_the_install(fake):
    proc, _, _ = run(fake, FAKE_MISSING="make", FAKE_DPKG_LOCKED="forever")
    assert proc.returncode == 1
    assert "Could not get lock /var/lib/dpkg/lock-frontend" in proc.stderr
    assert "install_deps: error: could not install make" in proc.stderr
