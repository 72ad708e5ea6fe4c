"""Reference data: real images labelled with an object and a region, as DIG In uses them.

DIG In's realism and diversity indicators compare generated images with real ones of the same
region, or of the same object and region. The names live in one module per job and are all
importable from here: :mod:`.labels` (kinds, regions, objects, :class:`Record`),
:mod:`.reference_set` (:class:`ReferenceSet` and balancing), :mod:`.loaders` (GeoDE, DollarStreet,
a manifest CSV, ``--t2i-reference``), :mod:`.images` (decoding, synthetic rendering) and
:mod:`.synthetic` (an offline synthetic set).

Example:
    >>> ref = load_reference("synthetic", objects=["bag"], regions=["africa", "europe"], per_group=2)
    >>> len(ref), ref.synthetic, sorted(ref.regions)
    (4, True, ['africa', 'europe'])
    >>> open_image(ref.records[0]).mode
    'RGB'
"""

from __future__ import annotations

from t2i_fairness.references.images import SYNTHETIC_VERSION, open_image, render_synthetic
from t2i_fairness.references.labels import (
    DOLLARSTREET_OBJECTS, DOLLARSTREET_REGIONS, GEODE_REGION_SLUGS, KINDS, KNOWN_OBJECTS, REGION_SLUGS,
    Record,
)
from t2i_fairness.references.loaders import (
    DOLLARSTREET_COLUMNS, DOLLARSTREET_CSVS, GEODE_COLUMNS, GEODE_INDEX, MANIFEST_COLUMNS, MANIFEST_CSV,
    detect_kind, load_dollarstreet, load_geode, load_manifest, load_reference, parse_reference_option,
    reference_from_option,
)
from t2i_fairness.references.reference_set import BALANCE_SAMPLERS, ReferenceSet, balance_records
from t2i_fairness.references.synthetic import synthetic_reference

__all__ = [
    "DOLLARSTREET_COLUMNS", "DOLLARSTREET_OBJECTS", "DOLLARSTREET_REGIONS", "GEODE_COLUMNS",
    "GEODE_REGION_SLUGS", "KINDS", "KNOWN_OBJECTS", "MANIFEST_COLUMNS", "REGION_SLUGS",
    "Record", "ReferenceSet", "balance_records", "detect_kind", "load_dollarstreet", "load_geode",
    "load_manifest", "load_reference", "open_image", "parse_reference_option",
    "reference_from_option", "render_synthetic", "synthetic_reference",
]
