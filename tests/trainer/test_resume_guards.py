"""What ``abc train --resume`` and ``abc eval --run`` refuse or keep (#24 items 3, 5, 6): a changed config, a
symlinked config or checkpoint, an untrusted checkpoint, a finished run resumed, a run's own result re-evaluated."""

from __future__ import annotations

import hashlib
import json
import os
import shutil

import pytest

torch = pytest.importorskip("torch")

from agentbench_crbc.trainer.checkpoint import write_manifest  # noqa: E402
from agentbench_crbc.trainer.metrics import read_metrics  # noqa: E402

from ._util import run_abc, set_args  # noqa: E402


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A finished 2-update tiny run (GRPO, with the warm start); each test works on its own copy."""
    root = tmp_path_factory.mktemp("finished")
    r = run_abc(["train", "--credit", "grpo", *set_args([f"out_dir={root}", "updates=2"])], cwd=root, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    (run,) = [p for p in root.iterdir() if (p / "config.toml").exists()]
    return run


@pytest.fixture
def run(finished_run, tmp_path):
    copy = tmp_path / finished_run.name
    shutil.copytree(finished_run, copy, symlinks=True)
    return copy


def _digest(root):
    """Every file of a run folder (symlinks as their targets' names) with its content hash."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_symlink():
            out[rel] = "-> " + os.readlink(p)
        elif p.is_file():
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _refused(r, *words):
    assert r.returncode == 2, (r.stdout[-2000:], r.stderr[-2000:])
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr[-3000:]
    (line,) = lines
    for w in words:
        assert w in line, line
    return line


def _edit(run, old, new):
    path = run / "config.toml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


@pytest.mark.slow
@pytest.mark.parametrize(("old", "new", "key"), [
    ('name = "grpo"', 'name = "crbc"', "credit.name"),
    ('id = "abc/SokobanText-v0"', 'id = "abc/SokobanText-7x7-2b-v0"', "env.id"),
    ("tiny_hidden = 128", "tiny_hidden = 64", "model.tiny_hidden"),
])
def test_resume_refuses_an_edited_config_naming_the_keys(run, old, new, key):
    _edit(run, old, new)
    before = _digest(run)
    r = run_abc(["train", "--resume", str(run), "--set", "updates=3"], cwd=run.parent)
    line = _refused(r, key, "edited", "start a new run")
    assert "updates" in line  # the line says what a resume may change
    assert _digest(run) == before


@pytest.mark.slow
def test_resume_refuses_a_set_of_a_key_that_must_not_change(run):
    before = _digest(run)
    r = run_abc(["train", "--resume", str(run), "--set", "optim.lr=5e-4", "--set", "updates=3"], cwd=run.parent)
    _refused(r, "--set cannot change optim.lr")
    assert _digest(run) == before


@pytest.mark.slow
def test_resume_refuses_a_symlinked_config_and_a_checkpoint_outside_the_run(run, tmp_path):
    elsewhere = tmp_path / "elsewhere.toml"
    shutil.move(run / "config.toml", elsewhere)
    (run / "config.toml").symlink_to(elsewhere)
    before = _digest(run)
    _refused(run_abc(["train", "--resume", str(run)], cwd=run.parent), "config.toml is a symlink")
    assert _digest(run) == before
    (run / "config.toml").unlink()
    shutil.copy(elsewhere, run / "config.toml")
    ckpt = run / "checkpoints" / "ckpt-000002"
    outside = tmp_path / "outside-ckpt"
    shutil.move(ckpt, outside)
    ckpt.symlink_to(outside)
    before = _digest(run)
    _refused(run_abc(["train", "--resume", str(run)], cwd=run.parent), "ckpt-000002 is a symlink", "outside")
    assert _digest(run) == before


@pytest.mark.slow
def test_a_checkpoint_without_a_manifest_is_not_trusted(run):
    for ckpt in (run / "checkpoints").glob("ckpt-*"):
        state = json.loads((ckpt / "state.json").read_text())
        (ckpt / "state.json").write_text(json.dumps({**state, "stage": "bogus"}))
        (ckpt / "manifest.json").unlink()
    before = _digest(run)
    r = run_abc(["train", "--resume", str(run), "--set", "updates=3"], cwd=run.parent)
    _refused(r, "no intact checkpoint", "ckpt-000002: manifest.json is missing")
    assert _digest(run) == before  # refused before anything is renamed (#54 item 7)
    # a bogus stage under a valid manifest: refused by name, before anything is written
    write_manifest(run / "checkpoints" / "ckpt-000002")
    before = _digest(run)
    _refused(run_abc(["train", "--resume", str(run)], cwd=run.parent), "stage 'bogus'")
    assert _digest(run) == before


@pytest.mark.slow
def test_resuming_a_finished_run_changes_nothing_and_more_updates_keep_time_monotonic(run):
    before = _digest(run)
    r = run_abc(["train", "--resume", str(run)], cwd=run.parent)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "already finished" in r.stdout
    assert _digest(run) == before  # no `resume` row in metrics.jsonl, no rewritten config (#54 item 7)
    r = run_abc(["train", "--resume", str(run), "--set", "updates=3"], cwd=run.parent)
    assert r.returncode == 0, r.stderr[-3000:]
    after = read_metrics(run)
    times = [x["time"] for x in after]
    assert times == sorted(times), times
    resumes = [x for x in after if x["stage"] == "resume"]
    assert [x["step"] for x in resumes] == [2] and resumes[0]["checkpoint"] == "ckpt-000002"
    assert [x["step"] for x in after if x["stage"] == "eval"] == [0, 0, 2, 3]
    assert json.loads((run / "results.json").read_text())["updates"] == 3


@pytest.mark.slow
def test_an_edit_to_another_methods_options_is_refused_as_an_edit(run):
    # #54 item 7: crbc -> grpo was refused with grpo's `unknown option 'beta'`, not as the edit it is
    _edit(run, "[credit.options]\n", "[credit.options]\nbeta = 0.98\n")
    before = _digest(run)
    _refused(run_abc(["train", "--resume", str(run)], cwd=run.parent),
             "config.toml was edited since ckpt-000002 (credit.options changed)", "start a new run")
    assert _digest(run) == before


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["symlinked rng.pt", "truncated model"])
def test_no_intact_checkpoint_is_refused_naming_the_file_and_renames_nothing(run, tmp_path, damage):
    for ckpt in (run / "checkpoints").glob("ckpt-*"):
        if damage == "symlinked rng.pt":
            shutil.copy(ckpt / "rng.pt", tmp_path / f"{ckpt.name}-rng.pt")
            (ckpt / "rng.pt").unlink()
            (ckpt / "rng.pt").symlink_to(tmp_path / f"{ckpt.name}-rng.pt")
        else:
            big = max((p for p in ckpt.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
            big.write_bytes(big.read_bytes()[:100])
    before = _digest(run)
    line = _refused(run_abc(["train", "--resume", str(run), "--set", "updates=3"], cwd=run.parent),
                    "--resume: no intact checkpoint in", "ckpt-000002: ")
    assert ("rng.pt is a symlink" if damage == "symlinked rng.pt" else "bytes, the manifest says") in line
    assert _digest(run) == before and not list((run / "checkpoints").glob("damaged-*"))


@pytest.mark.slow
def test_eval_of_a_run_never_overwrites_its_own_result(run):
    own = {p: p.read_bytes() for p in (run / "eval").iterdir() if p.is_file()}
    assert run / "eval" / "update-0002.json" in own
    r = run_abc(["eval", "--run", str(run), "--episodes", "2", "--no-greedy"], cwd=run.parent)
    assert r.returncode == 0, r.stderr[-3000:]
    assert {p: p.read_bytes() for p in (run / "eval").iterdir() if p.is_file()} == own
    (rerun,) = (run / "eval").glob("rerun-*")
    assert json.loads((rerun / "update-0002.json").read_text())["t0.4"]["n_episodes"] == 2
    rows = [json.loads(x) for x in (rerun / "records.jsonl").read_text().splitlines()]
    assert [x["n_episodes"] for x in rows if x["subtask"] == "all"] == [2]
    assert sum(x["n_episodes"] for x in rows if x["subtask"] != "all") in (0, 2)  # split by plan length
    r = run_abc(["eval", "--run", str(run), "--episodes", "2", "--no-greedy", "--out", str(run / "eval")],
                cwd=run.parent)
    _refused(r, "--force")
    assert {p: p.read_bytes() for p in (run / "eval").iterdir() if p.is_file()} == own
    r = run_abc(["eval", "--run", str(run), "--episodes", "2", "--no-greedy", "--force"], cwd=run.parent)
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads((run / "eval" / "update-0002.json").read_text())["t0.4"]["n_episodes"] == 2  # asked for


def test_only_kl_coef_zero_passes_among_the_fixed_keys():
    from agentbench_crbc.trainer.config import load_config
    from agentbench_crbc.trainer.resume import _changed, fixed_config

    base = fixed_config(load_config())
    off = fixed_config(load_config(overrides=["optim.kl_coef=0"]))
    more = fixed_config(load_config(overrides=["optim.kl_coef=0.5"]))
    assert _changed(base, off) == [] and _changed(base, more) == ["optim.kl_coef"]


# -- #31: one writer per run folder, labels from the run, the umask kept, damaged outputs refused ---------------------

@pytest.mark.slow
def test_a_second_writer_of_a_run_folder_is_refused(run):
    from agentbench_crbc.trainer.run import lock_run_folder

    before = _digest(run)
    lock = lock_run_folder(run)  # as a first `abc train --resume` holds it while training
    try:
        for argv in (["train", "--resume", str(run), "--set", "updates=3"],
                     ["eval", "--run", str(run), "--episodes", "2", "--no-greedy"]):
            _refused(run_abc(argv, cwd=run.parent), "another `abc` process is writing this run folder")
            assert _digest(run) == before
    finally:
        lock.release()


@pytest.mark.slow
def test_eval_records_of_a_run_are_labelled_from_the_run(run, tmp_path):
    other = tmp_path / "other-run"  # run B, whose own result must stay
    shutil.copytree(run, other, symlinks=True)
    before, theirs = _digest(run), _digest(other)
    quick = ["--episodes", "2", "--no-greedy"]
    for extra, word in ((["--set", "seed=5"], "--set seed"), (["--set", "credit.name=crbc"], "--set credit.name"),
                        (["--method", "crbc"], "--method crbc"), (["--out", str(other / "eval")], "--force")):
        _refused(run_abc(["eval", "--run", str(run), *quick, *extra], cwd=run.parent), word)
        assert _digest(run) == before and _digest(other) == theirs


def test_trainer_outputs_follow_the_umask(finished_run):
    import stat

    umask = os.umask(0o022)
    os.umask(umask)  # the umask the fixture's run had (inherited from this process)
    weights = [finished_run / "model" / "model.safetensors", *finished_run.glob("checkpoints/ckpt-*/model/*")]
    assert len(weights) > 1
    for p in weights:
        assert stat.S_IMODE(p.stat().st_mode) == 0o666 & ~umask, (p, oct(p.stat().st_mode))
    for d in [finished_run / "model", *finished_run.glob("checkpoints/ckpt-*")]:
        assert stat.S_IMODE(d.stat().st_mode) == 0o777 & ~umask, (d, oct(d.stat().st_mode))


@pytest.mark.slow
@pytest.mark.parametrize(("name", "data"), [("results.json", "{"), ("results.json", "[]"),
                                            ("eval/records.jsonl", '{"update": 2}\n{'),
                                            ("model/config.json", "{")])
def test_damaged_run_outputs_are_one_line_for_eval_and_resume(run, name, data):
    (run / name).write_text(data)
    before = _digest(run)
    argvs = [["eval", "--run", str(run), "--episodes", "2", "--no-greedy", "--force"]]
    if not name.startswith("model"):
        argvs.append(["train", "--resume", str(run), "--set", "updates=3"])
    for argv in argvs:
        _refused(run_abc(argv, cwd=run.parent), name.split("/")[-1])
        assert _digest(run) == before


@pytest.mark.slow
@pytest.mark.parametrize("how", ["link_outside", "no_manifest"])
def test_a_reference_folder_the_trainer_did_not_write_is_never_loaded(run, tmp_path, how):
    ref = run / "reference"
    shutil.rmtree(ref, ignore_errors=True)
    if how == "link_outside":
        outside = tmp_path / "elsewhere"
        outside.mkdir()
        torch.save({}, outside / "state.pt")
        ref.symlink_to(outside)
    else:
        ref.mkdir()
        torch.save({}, ref / "state.pt")
    before = _digest(run)
    _refused(run_abc(["train", "--resume", str(run), "--set", "updates=3"], cwd=run.parent), "reference")
    assert _digest(run) == before
