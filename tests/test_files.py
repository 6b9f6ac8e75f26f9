import bz2
import gzip

import pytest

from litebert.files import format_suffix, open_bytes
from litebert.tasks.common import table_delimiter


@pytest.mark.parametrize(
    "name, suffix",
    [
        ("a.tsv", ".tsv"),
        ("a.TSV.gz", ".tsv"),
        ("dev.v2.json.bz2", ".json"),
        ("x.txt.gz.bz2", ".txt"),
        ("a.gz", ""),
        ("README", ""),
    ],
)
def test_format_suffix_looks_through_compression(name, suffix):
    assert format_suffix(name) == suffix


def test_open_bytes_decompresses_by_suffix_in_any_case(tmp_path):
    data = b"sentence\tlabel\nfine\t1\n"
    (tmp_path / "a.tsv").write_bytes(data)
    (tmp_path / "b.TSV.GZ").write_bytes(gzip.compress(data))
    (tmp_path / "c.tsv.bz2").write_bytes(bz2.compress(data))
    for name in ("a.tsv", "b.TSV.GZ", "c.tsv.bz2"):
        with open_bytes(tmp_path / name) as f:
            assert f.read() == data
        assert table_delimiter(tmp_path / name) == "\t"
