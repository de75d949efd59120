"""A saved folder (a checkpoint, ``reference/``) holds its own files only (#40 item 12): a file in it that links
elsewhere, even to a copy with the very bytes its manifest lists, or a manifest naming a path outside it, is refused
on ``--resume`` in one line naming it."""

from __future__ import annotations

import json
import shutil

import pytest

pytest.importorskip("torch")

from agentbench_crbc.errors import ConfigError
from agentbench_crbc.trainer.checkpoint import trusted_reference, verify_folder, write_manifest


@pytest.fixture
def run(tmp_path):
    run = tmp_path / "run"
    ref = run / "reference"
    ref.mkdir(parents=True)
    (ref / "state.pt").write_bytes(b"weights" * 100)
    write_manifest(ref)
    assert trusted_reference(run) == ref  # intact: trusted
    return run


def test_a_reference_file_linking_outside_the_run_is_refused(run, tmp_path):
    outside = tmp_path / "elsewhere.pt"
    shutil.copy(run / "reference" / "state.pt", outside)  # the same bytes: the manifest's sha256 matches
    (run / "reference" / "state.pt").unlink()
    (run / "reference" / "state.pt").symlink_to(outside)
    with pytest.raises(ConfigError, match=r"reference is not a reference the trainer wrote \(state\.pt is a symlink "
                                          r"\(to .*elsewhere\.pt\)") as info:
        trusted_reference(run)
    assert "\n" not in str(info.value)


def test_a_link_inside_the_folder_is_refused_too(run):
    (run / "reference" / "extra.pt").symlink_to(run / "reference" / "state.pt")
    with pytest.raises(ConfigError, match=r"extra\.pt is a symlink"):
        verify_folder(run / "reference", require_manifest=True)


@pytest.mark.parametrize("name", ["../../outside.pt", "/etc/hostname"])
def test_a_manifest_naming_a_path_outside_the_folder_is_refused(run, tmp_path, name):
    path = run / "reference" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["files"][name] = {"bytes": 1, "sha256": "0" * 64}
    path.write_text(json.dumps(manifest))
    with pytest.raises(ConfigError, match="outside the folder"):
        verify_folder(run / "reference", require_manifest=True)


def test_a_manifest_of_the_wrong_shape_is_unreadable_not_a_traceback(run):
    path = run / "reference" / "manifest.json"
    path.write_text(json.dumps({"format": 1, "files": {"state.pt": 5}}))
    with pytest.raises(ConfigError, match=r"manifest\.json is unreadable"):
        verify_folder(run / "reference", require_manifest=True)
