"""Pretraining examples: SOP/NSP/none segment pairs, whole-word n-gram masks, sharded storage and batches.

Pipeline (docs/paper.md §3): ``build`` streams a corpus through pairs.py and masking.py into shards.py's fixed-size
shards plus a manifest; ``PretrainingBatches`` / ``read_examples`` (collate.py) read them back; stats.py
summarises what was built; probes.py makes balanced NSP and SOP probe sets from a build's held-out documents.
"""

from litebert.data.build import BuildConfig, build
from litebert.data.collate import PretrainingBatches, read_examples
from litebert.data.config import DataConfig
from litebert.data.probes import probe_batches, probe_documents, probe_sets
from litebert.data.shards import read_manifest
from litebert.data.stats import StatsConfig, data_stats

__all__ = [
    "BuildConfig",
    "DataConfig",
    "PretrainingBatches",
    "StatsConfig",
    "build",
    "data_stats",
    "probe_batches",
    "probe_documents",
    "probe_sets",
    "read_examples",
    "read_manifest",
]
