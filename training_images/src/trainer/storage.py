"""Where checkpoints live: a folder, or an object-store URL read and written through fsspec.

A folder may be local, a network file system (EFS, Filestore) or a bucket mounted by GCS FUSE or
Mountpoint for S3. Those mounts are not POSIX file systems, and the difference that matters here
is rename: Mountpoint does not rename at all on S3 general purpose buckets (awslabs/mountpoint-s3
doc/SEMANTICS.md, "Behavior tenets"), and GCS FUSE refuses to rename a non-empty folder unless
`rename-dir-limit` allows it, and then copies and deletes object by object, not atomically
(GoogleCloudPlatform/gcsfuse docs/semantics.md, "Directories"). So nothing here renames: files are written where they belong, and
torch.distributed.checkpoint's one rename (`.metadata.tmp` to `.metadata` in
FileSystemWriter.finish, torch/distributed/checkpoint/filesystem.py) is turned into a copy.

A URL (`s3://bucket/run`, `gs://bucket/run`) goes through DCP's fsspec storage
(torch/distributed/checkpoint/_fsspec_filesystem.py: FsspecWriter, FsspecReader), which needs the
protocol's fsspec package: s3fs or gcsfs (`pip install 'gpu-platform-trainer[s3]'` or `[gcs]`).
"""

from __future__ import annotations

import io
import os
import shutil
from typing import Any

from fsspec import AbstractFileSystem
from fsspec.core import url_to_fs
from torch.distributed.checkpoint._fsspec_filesystem import FsspecReader, FsspecWriter
from torch.distributed.checkpoint.filesystem import FileSystemReader, FileSystemWriter
from torch.distributed.checkpoint.storage import StorageReader, StorageWriter

from trainer.config import ConfigError

# The fsspec package each object-store protocol needs, and the trainer's extra that installs it.
URL_EXTRAS = {"s3": "s3", "gs": "gcs", "gcs": "gcs"}


def is_url(location: str) -> bool:
    return "://" in location


def _fsync(stream: Any) -> None:
    """Flush a local file to disk; object-store streams are durable once closed."""
    try:
        os.fsync(stream.fileno())
    except (AttributeError, OSError, io.UnsupportedOperation):
        pass


class _CopyInsteadOfRename:
    """DCP's file system for one writer, with `rename` done as copy-then-delete.

    Everything else is delegated unchanged, so DCP still writes `.metadata` last; only the
    final move, which a bucket mount may refuse, becomes a copy of that one small file.
    """

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def rename(self, path: str | os.PathLike[str], new_path: str | os.PathLike[str]) -> None:
        with self._inner.create_stream(path, "rb") as src, self._inner.create_stream(new_path, "wb") as dst:
            shutil.copyfileobj(src, dst)
            dst.flush()
            _fsync(dst)
        self._inner.rm_file(path)


class Store:
    """A checkpoint root and the few operations the checkpointer needs on it."""

    def __init__(self, location: str) -> None:
        self.url = is_url(location)
        self.location = location.rstrip("/") if self.url else os.path.abspath(location)
        try:
            fs, _ = url_to_fs(self.location)
        except ImportError:
            protocol = self.location.split("://", 1)[0]
            extra = URL_EXTRAS.get(protocol, protocol)
            raise ConfigError(
                f"--checkpoint-dir {location}: {protocol}:// needs its fsspec package; "
                f"pip install 'gpu-platform-trainer[{extra}]'"
            ) from None
        except ValueError as error:
            raise ConfigError(f"--checkpoint-dir {location}: {error}") from None
        self.fs: AbstractFileSystem = fs

    def join(self, *names: str) -> str:
        return "/".join([self.location, *names])

    def names(self) -> list[str]:
        """Names of the entries directly under the root; none when it does not exist yet."""
        if not self.fs.exists(self.location):
            return []
        return sorted(str(p).rstrip("/").rsplit("/", 1)[-1] for p in self.fs.ls(self.location, detail=False))

    def exists(self, path: str) -> bool:
        return bool(self.fs.exists(path))

    def read_text(self, path: str) -> str:
        with self.fs.open(path, "r") as stream:
            return str(stream.read())

    def write_text(self, path: str, text: str) -> None:
        """Written in place and made durable before returning; never through a rename."""
        if self.url:
            with self.fs.open(path, "w") as stream:
                stream.write(text)
            return
        with open(path, "w") as stream:
            stream.write(text)
            stream.flush()
            _fsync(stream)

    def makedirs(self, path: str) -> None:
        self.fs.makedirs(path, exist_ok=True)

    def remove(self, path: str) -> None:
        """Remove a folder and everything in it; nothing when it is already gone."""
        if self.fs.exists(path):
            self.fs.rm(path, recursive=True)

    def writer(self, folder: str) -> StorageWriter:
        writer: FileSystemWriter = FsspecWriter(folder) if self.url else FileSystemWriter(folder)
        writer.fs = _CopyInsteadOfRename(writer.fs)  # type: ignore[assignment]
        return writer

    def reader(self, folder: str) -> StorageReader:
        return FsspecReader(folder) if self.url else FileSystemReader(folder)
