"""Raw documents -> sentences: the first stage of the pipeline.

files.py      which files a corpus is: directories expanded, links out of them skipped, duplicates read once
read.py       files and directories (.txt, .jsonl, .parquet, .arrow, .gz, .bz2) as a stream of documents;
              `prepare` writes the official format (one sentence per line, a blank line between documents);
              PrepareConfig is what it reads and writes
columnar.py   Parquet and Arrow files: one text column, row group by row group (pyarrow, the parquet extra)
lines.py      a file as decoded lines: bad bytes replaced and reported, long lines in bounded pieces
sentences.py  sentence splitting (sentencex plus repairs measured on English and Korean text)
normalize.py  the text normalisation the tokenizer applies (the official preprocess_text, Korean kept whole)
report.py     what a read found: counts, and every file, line or byte skipped or repaired
"""

from litebert.text.files import Paths, iter_files, path_list
from litebert.text.normalize import Normalizer
from litebert.text.read import READER_VERSION, PrepareConfig, ReadConfig, prepare, read_documents
from litebert.text.report import TextReport
from litebert.text.sentences import split_sentences

__all__ = [
    "READER_VERSION",
    "Normalizer",
    "Paths",
    "PrepareConfig",
    "ReadConfig",
    "TextReport",
    "iter_files",
    "path_list",
    "prepare",
    "read_documents",
    "split_sentences",
]
