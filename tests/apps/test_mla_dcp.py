"""mla-dcp on the host: the ranks as processes of this machine with the socket transport (every
part of the distributed dcp run except NCCL itself), started by mla-dcp (--ranks N) or as a
launcher starts them (torchrun's and mpirun's variables, rank 0 serving the rendezvous over
localhost TCP). The binary comes from $MLA_DCP_BIN (set by CTest)."""
import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from built_tools import skip_unless_built

BIN = os.environ.get("MLA_DCP_BIN", "build/bin/mla-dcp")
REPO = Path(__file__).resolve().parents[2]
UNEVEN = REPO / "tests" / "lib" / "dcp" / "scenarios" / "dcp_uneven_ownership.json"


def run(*args, env=None, timeout=600):
    e = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARIABLES}
    e.update(env or {})
    return subprocess.run([BIN, *args], capture_output=True, text=True, env=e, timeout=timeout)


LAUNCHER_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_RANK",
                      "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "MLA_DCP_PORT",
                      "TORCHELASTIC_USE_AGENT_STORE")


binary_exists = skip_unless_built(BIN)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def checks_of(report):
    return {(s["name"], c["id"]): c for s in report["scenarios"] for c in s["checks"]}


def test_local_ranks_agree_with_the_reference_and_the_simulation_bit_for_bit(tmp_path):
    out = tmp_path / "r.json"
    p = run("--ranks", "3", "--backend", "host", "--report", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    report = json.loads(out.read_text())
    assert report["provenance"]["tool"] == "mla-dcp"
    details = report["provenance"]["backend_details"]
    assert details["dcp_ranks"] == "3" and details["dcp_transport"] == "socket" and details["dcp_launcher"] == "local"
    names = {s["name"] for s in report["scenarios"]}
    assert "attn_dcp_2_ranks_interleave_64" in names and "attn_all_invalid_rows_dcp" in names
    for (name, cid), c in checks_of(report).items():
        assert c["verdict"] == "PASS", (name, cid, c["reason"])
        if cid.endswith("/vs_simulated"):
            assert c["metrics"]["bit_exact"] is True and c["metrics"]["mismatches"] == 0
        else:
            assert cid == "dcp_distributed/3_ranks"
            assert c["metrics"]["ranks"] == 3 and c["metrics"]["ranks_disagreeing"] == 0


def test_ranks_without_positions_and_requests_shorter_than_the_interleave(tmp_path):
    out = tmp_path / "r.json"
    p = run("--ranks", "4", "--backend", "host", "--scenario", str(UNEVEN), "--report", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    c = checks_of(json.loads(out.read_text()))[("dcp_uneven_ownership", "dcp_distributed/4_ranks")]
    # Worked out by hand in tests/lib/dcp/test_shard.cpp (DcpOwnership.CountsByHand).
    assert c["metrics"]["rank_requests_without_positions"] == 13
    assert c["metrics"]["requests_shorter_than_interleave"] == 3
    assert c["verdict"] == "PASS"


def launched(tmp_path, variables, world, args=()):
    """Starts `world` processes the way a launcher does; returns (processes' results, rank 0's report)."""
    out = tmp_path / "launched.json"
    procs = []
    for rank in range(world):
        env = {k: v.format(rank=rank, world=world) for k, v in variables.items()}
        e = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARIABLES}
        e.update(env)
        cmd = [BIN, "--backend", "host", "--timeout", "60", "--report", str(out), *args]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e))
    results = [(p.wait(timeout=600), p.stdout.read(), p.stderr.read()) for p in procs]
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    return results, (json.loads(out.read_text()) if out.exists() else None)


def test_torchrun_variables_over_localhost_tcp_give_the_local_runs_results(tmp_path):
    port = free_port()
    results, report = launched(tmp_path, {"RANK": "{rank}", "WORLD_SIZE": "{world}", "LOCAL_RANK": "{rank}",
                                          "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}, 3)
    assert [r[0] for r in results] == [0, 0, 0], results
    assert report["provenance"]["backend_details"]["dcp_launcher"] == "torchrun"
    local = tmp_path / "local.json"
    p = run("--ranks", "3", "--backend", "host", "--report", str(local))
    assert p.returncode == 0, p.stderr
    # The same ranks on the same backend: the same bits, whoever started the processes.
    want, got = checks_of(json.loads(local.read_text())), checks_of(report)
    assert want.keys() == got.keys()
    for key in want:
        for metric in ("max_abs_err", "cos_diff", "lse_max_abs_err", "mismatches"):
            assert got[key]["metrics"].get(metric) == want[key]["metrics"].get(metric), (key, metric)


def test_mpirun_variables_and_an_explicit_port(tmp_path):
    port = free_port()
    results, report = launched(tmp_path, {"OMPI_COMM_WORLD_RANK": "{rank}", "OMPI_COMM_WORLD_SIZE": "{world}",
                                          "MASTER_ADDR": "localhost", "MASTER_PORT": "1", "MLA_DCP_PORT": str(port)}, 2,
                               ("--filter", "attn_dcp_4_ranks_interleave_8"))
    assert [r[0] for r in results] == [0, 0], results
    assert report["provenance"]["backend_details"]["dcp_launcher"] == "mpirun"
    assert [c["verdict"] for s in report["scenarios"] for c in s["checks"]] == ["PASS", "PASS"]


def test_ranks_that_select_different_scenarios_are_refused(tmp_path):
    port = free_port()
    out = []
    procs = []
    for rank, pattern in ((0, "attn_dcp_2*"), (1, "attn_dcp_4*")):
        e = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARIABLES}
        e.update({"RANK": str(rank), "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
        procs.append(subprocess.Popen([BIN, "--backend", "host", "--timeout", "30", "--filter", pattern],
                                      stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=e))
    for p in procs:
        out.append((p.wait(timeout=120), p.stderr.read()))
        p.stderr.close()
    assert out[0][0] == 3 and "rank 1 does not run what rank 0 runs" in out[0][1], out
    assert out[1][0] == 3 and "refused" in out[1][1], out


@pytest.mark.parametrize("args,env,message", [
    ((), {}, "give --ranks N"),
    (("--ranks", "2", "--backend", "python:x.py"), {}, "takes the harness's backends"),
    (("--backend", "host"), {"WORLD_SIZE": "2"}, "RANK is not set"),
    (("--ranks", "2", "--backend", "host"), {"RANK": "0", "WORLD_SIZE": "3", "MASTER_ADDR": "h", "MASTER_PORT": "1"},
     "--ranks 2, but torchrun started 3 processes"),
    (("--ranks", "2", "--backend", "host", "--scenario", "gather_block_size_1"), {}, "no scenario matches"),
    (("--ranks", "0",), {}, "--ranks"),
])
def test_bad_usage_exits_2(args, env, message):
    p = run(*args, env=env)
    assert p.returncode == 2, p.stdout + p.stderr
    assert message in p.stderr, p.stderr


def test_the_nccl_transport_says_why_it_is_missing():
    p = run("--ranks", "2", "--backend", "host", "--transport", "nccl")
    assert p.returncode == 2, p.stderr
    assert ("unavailable" in p.stderr or "needs the cuda backend" in p.stderr), p.stderr


def test_list_shows_the_scenarios_with_a_dcp_check():
    p = run("--list")
    assert p.returncode == 0, p.stderr
    assert "attn_dcp_4_ranks_interleave_8" in p.stdout and "vllm_mixed_small" not in p.stdout
