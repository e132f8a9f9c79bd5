"""Tests of scripts/peer_check.py, the bit-exact check of an `mla-bench --dump`: a host dump matches
the PyTorch recomputation bit for bit, a changed output byte is a mismatch (exit 1), and a dump it
cannot read is exit 2. The recomputation needs PyTorch (those tests skip without it); the refusals
run with the stand-in of tests/scripts/conftest.py.
"""

from __future__ import annotations

import json

import pytest


def dump(bench, tmp_path):
    out = tmp_path / "dump"
    bench("--dump", out)
    return out


def test_the_dump_is_required(peer_check, capsys):
    with pytest.raises(SystemExit) as e:
        peer_check.parse_args([])
    assert e.value.code == 2 and "--dump" in capsys.readouterr().err


def test_a_dump_of_another_layout_is_refused(peer_check, bench, tmp_path, capsys):
    d = dump(bench, tmp_path)
    manifest = json.loads((d / "manifest.json").read_text())
    manifest["layout"]["entry_bytes"] = 640
    (d / "manifest.json").write_text(json.dumps(manifest))
    assert peer_check.main(["--dump", str(d), "--device", "cpu"]) == 2
    assert "layout.entry_bytes is 640, this script expects 656" in capsys.readouterr().err


def test_a_missing_dump_is_refused(peer_check, tmp_path, capsys):
    assert peer_check.main(["--dump", str(tmp_path / "none"), "--device", "cpu"]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_a_host_dump_matches_bit_for_bit(peer_check, bench, tmp_path):
    pytest.importorskip("torch")
    d = dump(bench, tmp_path)
    out = tmp_path / "check.json"
    assert peer_check.main(["--dump", str(d), "--device", "cpu", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["check"] == {"cpu": {"mismatches": 0}}


def test_a_changed_output_byte_is_a_mismatch(peer_check, bench, tmp_path, capsys):
    pytest.importorskip("torch")
    d = dump(bench, tmp_path)
    manifest = json.loads((d / "manifest.json").read_text())
    path = d / manifest["ops"]["convert"]["outputs"]["valid_count"]["file"]
    data = bytearray(path.read_bytes())
    data[0] ^= 1
    path.write_bytes(bytes(data))
    assert peer_check.main(["--dump", str(d), "--device", "cpu"]) == 1
    assert "convert valid_count" in capsys.readouterr().out
