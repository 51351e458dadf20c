"""Download what tfm needs into a folder of wheels, for a machine with no internet access
(an air-gapped GPU node), whose Python and torch are its own.

Run it where pip can reach a package index; name the target's Python version and, to carry
less, the packages the target already has (`python3 -m pip freeze > have.txt` there):

    python scripts/wheelhouse.py wheels/ --python 3.12 --extras serve,ctranslate2 --have have.txt

Then, on the target, with the checkout and the folder copied over:

    python3 -m pip install --no-index --find-links wheels/ "tfm[serve,ctranslate2]"

torch is never downloaded: the target's own build (CUDA, ROCm) is kept, as it must satisfy
tfm's `torch>=...` requirement already. The wheels are for x86-64 Linux (manylinux) and the
given CPython version; tfm itself goes in as a wheel built from this checkout. Prints the
folder's contents as JSON (name, MB), largest first.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

try:
    import tomllib  # type: ignore[import-not-found]  # (mypy checks for Python 3.10, which has none)
except ModuleNotFoundError:  # Python 3.10
    raise SystemExit("scripts/wheelhouse.py needs Python >= 3.11 (tomllib); the target may be older") from None

ROOT = Path(__file__).resolve().parent.parent
# manylinux tags pip must be told one by one when it downloads for another platform.
PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in range(17, 40)] + ["manylinux2014_x86_64", "manylinux1_x86_64", "any"]
KEPT_ON_TARGET = {"torch"}  # the target's build is the one to use


def canonical(name: str) -> str:
    """A project name as pip compares them (PEP 503): lowercase, runs of -_. as one -."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    return canonical(re.split(r"[\s<>=!~;\[(@]", requirement.strip(), maxsplit=1)[0])


def requirements(extras: list[str]) -> list[str]:
    """tfm's dependencies and those of `extras` (an extra naming tfm's own extras is expanded),
    without the ones the target keeps."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    optional = project.get("optional-dependencies", {})
    unknown = [e for e in extras if e not in optional]
    if unknown:
        raise SystemExit(f"unknown extra(s): {', '.join(unknown)} (known: {', '.join(optional)})")
    todo, wanted, seen = list(extras), list(project["dependencies"]), set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for req in optional[extra]:
            own = re.fullmatch(r"tfm\[([\w,\s-]+)\]", req.strip())
            if own:
                todo += [e.strip() for e in own.group(1).split(",")]
            else:
                wanted.append(req)
    return [r for r in dict.fromkeys(wanted) if requirement_name(r) not in KEPT_ON_TARGET]


def wheel_project(path: Path) -> str:
    """The project a wheel file holds (its name up to the first '-', PEP 427)."""
    return canonical(path.name.split("-", 1)[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument(
        "--python",
        default=f"{sys.version_info.major}.{sys.version_info.minor}",
        help="the target's CPython version, e.g. 3.12 (default: this one's)",
    )
    ap.add_argument("--extras", default="", help="tfm extras, comma-separated: serve, ctranslate2, ...")
    ap.add_argument("--have", type=Path, help="`pip freeze` of the target: its packages are left out")
    args = ap.parse_args()
    extras = [e.strip() for e in args.extras.split(",") if e.strip()]
    args.folder.mkdir(parents=True, exist_ok=True)
    platform_args = [a for p in PLATFORMS for a in ("--platform", p)]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--only-binary=:all:",
            "--python-version",
            args.python,
            "--implementation",
            "cp",
            *platform_args,
            "--dest",
            str(args.folder),
            *requirements(extras),
        ],
        check=True,
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",  # tfm itself
            "--wheel-dir",
            str(args.folder),
            str(ROOT),
        ],
        check=True,
    )
    if args.have:
        have = {
            requirement_name(line)
            for line in args.have.read_text().splitlines()
            if line.strip() and not line.startswith("#")
        }
        for wheel in args.folder.glob("*.whl"):
            if wheel_project(wheel) in have and wheel_project(wheel) != "tfm":
                wheel.unlink()
    wheels = sorted(args.folder.glob("*.whl"), key=lambda p: p.stat().st_size, reverse=True)
    print(
        json.dumps(
            {
                "folder": str(args.folder),
                "python": args.python,
                "extras": extras,
                "total_mb": round(sum(w.stat().st_size for w in wheels) / 2**20, 1),
                "wheels": {w.name: round(w.stat().st_size / 2**20, 2) for w in wheels},
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
