"""The row store's shared tier through fsspec: content-addressed packs and their index objects."""

from __future__ import annotations

import contextlib
import uuid

from t2i_fairness.base.rowstore.codec import _coalesce


class _Remote:
    """The shared tier through fsspec: whole-object puts (temporary name + rename on ``file://``), ranged gets."""

    def __init__(self, url: str):
        try:
            import fsspec

            self.url = str(url).rstrip("/")
            self.fs, self.base = fsspec.core.url_to_fs(self.url)
        except (ImportError, ValueError) as exc:
            raise OSError(f"row store remote {url!r}: cannot open this fsspec URL ({exc})") from exc
        self.base = self.base.rstrip("/")
        protocol = self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,)
        self.local = any(p in ("file", "local") for p in protocol)

    def pack_path(self, namespace: str, digest: str) -> str:
        return f"{self.base}/{namespace}/packs/{digest}.rows"

    def index_path(self, namespace: str, digest: str) -> str:
        return f"{self.base}/{namespace}/index/{digest}.idx"

    def list_indexes(self, namespace: str) -> list[str]:
        folder = f"{self.base}/{namespace}/index"
        self.fs.invalidate_cache(folder)
        try:
            names = self.fs.ls(folder, detail=False)
        except FileNotFoundError:
            return []
        return [n.rsplit("/", 1)[-1][: -len(".idx")] for n in names if n.endswith(".idx")]

    def get(self, path: str) -> bytes | None:
        try:
            return self.fs.cat_file(path)
        except FileNotFoundError:
            return None

    def get_ranges(self, path: str, spans: list[tuple[int, int]]) -> list[bytes]:
        got: list = [b""] * len(spans)
        for a, b, idx in _coalesce(spans, gap=1 << 20):
            blob = self.fs.cat_file(path, start=a, end=b)
            for i in idx:
                s, e = spans[i]
                got[i] = blob[s - a : e - a]
        return got

    def put(self, path: str, data: bytes) -> None:
        parent = path.rsplit("/", 1)[0]
        self.fs.makedirs(parent, exist_ok=True)
        if self.local:
            tmp = f"{parent}/.tmp-{uuid.uuid4().hex}"
            self.fs.pipe_file(tmp, data)
            self.fs.mv(tmp, path)
        else:
            self.fs.pipe_file(path, data)

    def rm(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm(path)
