"""Shared plumbing of the example scripts: arguments, and figures written safely."""

import argparse
import os
import tempfile
from pathlib import Path

import matplotlib


matplotlib.use("Agg")


def parser(doc: str, default_out: str) -> argparse.ArgumentParser:
    """An argument parser with --out, --force and --quick."""
    p = argparse.ArgumentParser(
        description=doc.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", type=Path, default=Path(default_out), help="output file")
    p.add_argument("--force", action="store_true", help="overwrite --out")
    p.add_argument(
        "--quick", action="store_true", help="short horizon and few iterations"
    )
    return p


def check_out(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse, before any work, to overwrite an existing output without --force."""
    if args.out.exists() and not args.force:
        p.error(f"{args.out} exists; pass --force to overwrite it")


def save(write, path: Path) -> None:
    """Call write(tmp_path) beside `path`, then rename: never half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=path.suffix, dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    print(f"wrote {path}")
