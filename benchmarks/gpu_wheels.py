"""The wheel folder the GPU smoke run carries (the machine has torch, transformers and peft, no network): build it
and check it.

    python benchmarks/gpu_wheels.py            # builds .whl/ (the project wheel + the packages the GPU image lacks)
    python benchmarks/gpu_wheels.py --check    # checks .whl/ only

Wheels are for CPython 3.12 on manylinux x86_64 (the GPU image's Python); the folder must stay under 64 MiB (what
a device call carries, the working tree included). On the GPU machine::

    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import zipfile
from pathlib import Path

__all__ = ["LIMIT_BYTES", "PACKAGE_DIRS", "REQUIRED", "build", "check", "stale_files"]

ROOT = Path(__file__).resolve().parents[1]
LIMIT_BYTES = 64 * 1024 * 1024
#: distribution name (as in the wheel file name) -> version pin; the GPU image lacks these (torch, transformers,
#: peft, numpy, safetensors and accelerate are there)
REQUIRED = {
    "gymnasium": "1.2.0",
    "farama_notifications": "0.0.4",
    "cloudpickle": "3.1.1",
    "gguf": "0.17.1",
    "pluggy": "1.6.0",
    "filelock": "3.18.0",
    "scipy": "1.16.1",
    "threadpoolctl": "3.6.0",
    "pytest_timeout": "2.4.0",
}
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64")


def _dist_name(path: Path) -> str:
    return path.name.split("-")[0].lower().replace("-", "_")


def check(folder: Path) -> list[str]:
    """Problems with ``folder`` (empty list: ready): every required wheel and the project's own, one version each,
    each a valid zip for py3 / cp312 on x86_64 (or pure), the project's built from the source as it is now, total
    under :data:`LIMIT_BYTES`."""
    if not folder.is_dir():
        return [f"{folder} does not exist: run python benchmarks/gpu_wheels.py"]
    wheels = sorted(folder.glob("*.whl"))
    problems: list[str] = []
    names = [_dist_name(w) for w in wheels]
    for want in [*REQUIRED, "agentbench_crbc"]:
        if names.count(want) != 1:
            problems.append(f"{want}: {names.count(want)} wheels (want exactly one)")
    for w in wheels:
        tags = w.stem.split("-")[-3:]
        if not (tags[0].startswith("py3") or tags[0] == "cp312") or not (tags[2] == "any" or "x86_64" in tags[2]):
            problems.append(f"{w.name}: not for CPython 3.12 on x86_64")
        if not zipfile.is_zipfile(w):
            problems.append(f"{w.name}: not a wheel (zip)")
    own = [w for w in wheels if _dist_name(w) == "agentbench_crbc"]
    if len(own) == 1 and zipfile.is_zipfile(own[0]):
        differ = stale_files(own[0])
        if differ:
            problems.append(f"{own[0].name} is older than the source ({', '.join(differ[:3])} differ): rebuild it "
                            "with python benchmarks/gpu_wheels.py")
    size = sum(w.stat().st_size for w in wheels)
    if size >= LIMIT_BYTES:
        problems.append(f"{size / 2**20:.1f} MiB of wheels: over the 64 MiB a device call carries")
    return problems


#: where the wheel's subpackages come from in the tree (pyproject.toml's package-dir)
PACKAGE_DIRS = {"agentbench_crbc/plugins/": "plugins/", "agentbench_crbc/envs/": "envs/",
                "agentbench_crbc/configs/": "examples/configs/"}


def stale_files(wheel: Path, root: Path = ROOT) -> list[str]:
    """The project wheel's files whose source in ``root`` differs (a wheel built before the last edit)."""
    differ = []
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if not name.startswith("agentbench_crbc/") or name.endswith("/"):
                continue
            rel = next((src + name[len(pre):] for pre, src in PACKAGE_DIRS.items() if name.startswith(pre)), name)
            path = root / rel
            if path.is_file() and path.read_bytes() != z.read(name):
                differ.append(rel)
    return differ


def build(folder: Path) -> None:
    """Download the pinned wheels for Python 3.12 / manylinux x86_64 and build the project's own into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    plat = [a for p in PLATFORMS for a in ("--platform", p)]
    for name, version in REQUIRED.items():
        if any(_dist_name(w) == name for w in folder.glob("*.whl")):
            continue
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                        "--python-version", "3.12", "--implementation", "cp", *plat, "-d", str(folder),
                        f"{name.replace('_', '-')}=={version}"], check=True)
    for old in folder.glob("agentbench_crbc-*.whl"):
        old.unlink()
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(folder), str(ROOT)],
                   check=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=ROOT / ".whl")
    ap.add_argument("--check", action="store_true", help="check the folder only")
    args = ap.parse_args(argv)
    if not args.check:
        build(args.dir)
    problems = check(args.dir)
    size = sum(w.stat().st_size for w in args.dir.glob("*.whl")) if args.dir.is_dir() else 0
    for p in problems:
        print(f"wheels: {p}")
    print(f"wheels: {args.dir} {'ok' if not problems else 'NOT ready'} ({size / 2**20:.1f} MiB)")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
