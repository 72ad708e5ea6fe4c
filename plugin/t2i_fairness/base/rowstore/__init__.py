"""A feature row store: many small fixed-size rows (image features) per namespace, looked up by key.

One module per job: :mod:`.codec` (the self-checking record format), :mod:`.store` (the local
log-structured store and its sync), :mod:`.remote` (the fsspec shared tier) and :mod:`.features`
(the cache's feature rows and image index). docs/rowstore.md explains the design.

Example:
    >>> import tempfile
    >>> import numpy as np
    >>> store = RowStore(tempfile.mkdtemp())
    >>> store.put_many("clip", [("img1", np.arange(3, dtype=np.float32))])
    1
    >>> [r if r is None else r.tolist() for r in store.get_many("clip", ["img1", "img2"])]
    [[0.0, 1.0, 2.0], None]
    >>> store.close()
"""

from __future__ import annotations

import os  # noqa: F401  (tests patch os.write and os.replace through this module)

from t2i_fairness.base.rowstore.codec import FORMAT_VERSION, MAGIC, MAX_PAYLOAD, RowStoreError, decode_record, encode_record
from t2i_fairness.base.rowstore.features import FeatureRows, ImageIndex, RowEntries, migrate_legacy_features
from t2i_fairness.base.rowstore.store import RowStats, RowStore

__all__ = [
    "FORMAT_VERSION",
    "MAGIC",
    "MAX_PAYLOAD",
    "FeatureRows",
    "ImageIndex",
    "RowEntries",
    "RowStats",
    "RowStore",
    "RowStoreError",
    "decode_record",
    "encode_record",
    "migrate_legacy_features",
]
