"""Write the package's reference rates (``plugin/t2i_fairness/data/reference_rates.json``) from a cache.

A fresh clone has measured nothing, so its first run could not say how long it will take. The reference rates
are what the README's commands measured on the project's own machine: every CPU rate (generation and computing
steps) and every selection's step record in the cache of a fresh clone that ran them. A run reads them only
where its own cache has no measurement (``spine.rates.lookup_rate``) and names them as the reference machine's.

Usage, on a fresh clone after ``make gate`` and the README's paper-size command::

    python tools/reference_rates.py .t2i-cache --machine "2 CPU cores (AMD EPYC), 23 GB"
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from t2i_fairness.base.cache import Cache

OUT = Path(__file__).resolve().parents[1] / "plugin" / "t2i_fairness" / "data" / "reference_rates.json"
FOLDERS = ("rates", "steps")  # spine.rates: generation's rates, the steps' rates and step records


def cpu_entries(cache: Path) -> dict[str, dict]:
    """``{"<folder>/<key>": entry}`` for every CPU entry of the cache's rate folders."""
    store, entries = Cache(cache), {}
    for folder in FOLDERS:
        for path in sorted((cache / folder).rglob("*.json")):
            entry = store.read(path, json.loads, checksum=True)  # a damaged entry is reported and left out
            if entry is not None and entry.get("device") == "cpu":
                entries[f"{folder}/{path.stem}"] = entry
    return entries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cache", type=Path, help="the cache folder of the run that measured them (.t2i-cache)")
    parser.add_argument("--machine", required=True, help="the machine, as a run will name it")
    parser.add_argument("--output", type=Path, default=OUT)
    ns = parser.parse_args(argv)
    entries = cpu_entries(ns.cache)
    if not entries:
        print(f"{ns.cache}: no CPU rate in {', '.join(FOLDERS)}/", file=sys.stderr)
        return 1
    ns.output.write_text(json.dumps({"machine": ns.machine, "entries": entries}, indent=1, sort_keys=True) + "\n")
    print(f"{len(entries)} reference entries written to {ns.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
