"""Open a Hugging Face model directory: config.json plus safetensors weights (one file or sharded).

    directory/
      config.json                          required, a JSON object
      model.safetensors                    single-file weights, or
      model.safetensors.index.json         {"weight_map": {tensor name: shard file name}}
      model-00001-of-00002.safetensors ... the shards it names
      generation_config.json, tokenizer.json, ...   optional side files

PyTorch pickle checkpoints (*.bin, *.pt, ...) are refused and never opened: unpickling can run
arbitrary code. Every problem raises ModelError with one line naming the file and the field.
"""
from __future__ import annotations

import os
from pathlib import Path

from ..errors import ModelError
from .files import check_regular, read_regular
from .safetensors import MAX_HEADER_BYTES, SafetensorsFile, TensorView, parse_json_object, scan_nonfinite

__all__ = ["HFCheckpoint", "TensorView", "scan_nonfinite"]

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
MAX_JSON_BYTES = MAX_HEADER_BYTES   # side files (config, index, tokenizer config) are far smaller


def _allowed_roots(directory: Path) -> list[Path]:
    """Where files of `directory` may resolve to: the directory itself, plus the blob store when it is
    a Hugging Face hub cache snapshot (models--x/snapshots/<rev>/f -> ../../blobs/<hash>)."""
    root = directory.resolve()
    roots = [root]
    if root.parent.name == "snapshots":
        roots.append(root.parent.parent / "blobs")
    return roots


def _inside(directory: Path, filename: str) -> Path:
    """directory/filename after checking that the resolved path does not escape the directory."""
    path = directory / filename
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError) as e:   # symlink loop
        raise ModelError(f"{path}: cannot resolve ({e})") from None
    if not any(resolved.is_relative_to(root) for root in _allowed_roots(directory)):
        raise ModelError(f"{path}: resolves to {resolved}, outside the model directory")
    return path


def _check_file_name(name, where: str) -> str:
    """A shard name from the index: a plain file name inside the directory (no path parts)."""
    if not isinstance(name, str) or not name:
        raise ModelError(f"{where}: shard name {name!r} is not a non-empty string")
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        raise ModelError(f"{where}: shard name {name!r} is an absolute path (expected a file name in the directory)")
    if ".." in name.replace("\\", "/").split("/"):
        raise ModelError(f"{where}: shard name {name!r} escapes the model directory (expected a plain file name)")
    if "/" in name or "\\" in name or name == "." or not name.isprintable():
        raise ModelError(f"{where}: shard name {name!r} is not a plain file name")
    return name


def _read_json_object(path: Path) -> dict:
    """A JSON object file (size-capped, strict UTF-8, no repeated keys) or ModelError."""
    return parse_json_object(read_regular(path, MAX_JSON_BYTES), str(path))


def _no_weights(directory: Path) -> ModelError:
    """The error for a directory with neither model.safetensors nor its index, saying what is there."""
    try:
        names = sorted(p.name for p in directory.iterdir())
    except OSError as e:
        return ModelError(f"{directory}: cannot list ({e.strerror or e})")
    others = [n for n in names if n.endswith(".safetensors")]
    pickles = [n for n in names if n.endswith(PICKLE_SUFFIXES)]
    if others:
        return ModelError(f"{directory}: found {', '.join(others[:3])} but neither {SINGLE_FILE} nor {INDEX_FILE}")
    if pickles:
        return ModelError(f"{directory}: holds only PyTorch pickle checkpoints ({', '.join(pickles[:3])}"
                          f"{', ...' if len(pickles) > 3 else ''}); Colibri never unpickles (arbitrary code "
                          "execution risk): convert to safetensors first")
    return ModelError(f"{directory}: no weights: expected {SINGLE_FILE} or {INDEX_FILE}")


def _shard_map(directory: Path) -> dict[str, str]:
    """tensor name -> weight file name, from the index or the single file."""
    if (directory / SINGLE_FILE).exists():
        return {}
    index_path = directory / INDEX_FILE
    if not index_path.exists():
        raise _no_weights(directory)
    index = _read_json_object(_inside(directory, INDEX_FILE))
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise ModelError(f"{index_path}: weight_map must be a non-empty object of tensor name -> shard file")
    for tensor, shard in weight_map.items():
        _check_file_name(shard, f"{index_path}: weight_map[{tensor!r}]")
    return weight_map


class HFCheckpoint:
    """A Hugging Face model directory: config.json + weights (single file or sharded).

    Open with HFCheckpoint.open(path); tensors are zero-copy views valid until close().
    """

    def __init__(self, directory: Path, config: dict, shards: list[SafetensorsFile],
                 owner: dict[str, SafetensorsFile]):
        self.directory = directory
        self.config = config
        self._shards = shards
        self._owner = owner          # tensor name -> the file holding it
        self.files = [Path(s.path) for s in shards]
        self.total_bytes = sum(v.nbytes for s in shards for v in s.tensors.values())

    @classmethod
    def open(cls, path: str | os.PathLike) -> "HFCheckpoint":
        """Open and validate a model directory; ModelError for every problem."""
        directory = Path(path)
        if not directory.exists():
            raise ModelError(f"{directory}: no such directory")
        if not directory.is_dir():
            raise ModelError(f"{directory}: is a file, expected a model directory (config.json + *.safetensors)")
        if not (directory / "config.json").exists():
            raise ModelError(f"{directory / 'config.json'}: missing (expected a Hugging Face model directory)")
        config = _read_json_object(_inside(directory, "config.json"))
        weight_map = _shard_map(directory)
        shard_names = sorted(set(weight_map.values())) or [SINGLE_FILE]
        shards: list[SafetensorsFile] = []
        try:
            for name in shard_names:
                path = _inside(directory, name)
                if not path.exists():
                    raise ModelError(f"{path}: shard listed in {INDEX_FILE} does not exist" if weight_map
                                     else f"{path}: no such file")
                shards.append(SafetensorsFile(path))
            owner = _tensor_owners(shards)
            _check_index(weight_map, owner, directory / INDEX_FILE)
        except BaseException:
            for shard in shards:
                shard.close()
            raise
        return cls(directory, config, shards, owner)

    def __contains__(self, name: str) -> bool:
        return name in self._owner

    def names(self) -> list[str]:
        return sorted(self._owner)

    def tensor(self, name: str) -> TensorView:
        if name not in self._owner:
            raise ModelError(f"{self.directory}: missing tensor {name!r}")
        return self._owner[name].tensors[name]

    def file_path(self, filename: str) -> Path | None:
        """directory/filename if it exists (inside the directory), else None; ModelError if it is
        not a regular file."""
        path = _inside(self.directory, filename)
        if not path.exists():
            return None
        check_regular(path)
        return path

    def optional_json(self, filename: str) -> dict | None:
        """Parsed side file (generation_config.json, ...): None if absent, ModelError if not a JSON object."""
        path = self.file_path(filename)
        return None if path is None else _read_json_object(path)

    def mappings(self) -> list[tuple[str, int, int]]:
        """(path, address, size) of every weight file's mapping."""
        return [shard.mapping() for shard in self._shards]

    def close(self) -> None:
        """Unmap every weight file (see SafetensorsFile for the lifetime contract)."""
        for shard in self._shards:
            shard.close()
        self._owner = {}


def _tensor_owners(shards: list[SafetensorsFile]) -> dict[str, SafetensorsFile]:
    """tensor name -> its file; a name in two files is an error."""
    owner: dict[str, SafetensorsFile] = {}
    for shard in shards:
        for name in shard.tensors:
            if name in owner:
                raise ModelError(f"{shard.path}: tensor {name!r} is also in {owner[name].path}")
            owner[name] = shard
    return owner


def _check_index(weight_map: dict[str, str], owner: dict[str, SafetensorsFile], index_path: Path) -> None:
    """Each tensor the index lists is in the shard it names, and each shard tensor is listed."""
    for tensor, shard in weight_map.items():
        if tensor not in owner or Path(owner[tensor].path).name != shard:
            raise ModelError(f"{index_path}: weight_map: tensor {tensor!r} missing from shard {shard!r}")
    for tensor, holder in owner.items():
        if weight_map and tensor not in weight_map:
            raise ModelError(f"{holder.path}: tensor {tensor!r} is not listed in {index_path.name}")
