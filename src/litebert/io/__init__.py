"""Neutral helpers every stage uses: files by name, JSON in and out, and config dataclasses from dicts.

Inputs are opened through `open_bytes` (.gz and .bz2 decompressed on the fly, a file's format the suffix under
them, `format_suffix`), so corpora (`litebert.text`) and task files (`litebert.finetune.tasks`) read the same
compressed files the same way; every JSON file litebert writes beside data or weights (manifests, configs,
results) goes through `write_json` (atomic) and every one it reads through `read_json` (errors name the file and
line); `check_utf8_path` refuses a path that is not UTF-8 before any work. `from_dict` and `check_types` build a
`@dataclass(kw_only=True)` config from JSON with every unknown key and wrongly typed value named: each stage's
config uses them.

Writers: every file litebert writes goes to a temporary name first and is renamed when whole (`atomic_path`; a
directory of files, `staged_files`: the old files or all the new ones at any instant of a kill, `check_whole` for
its readers), and a full disk met on the way is a `DiskFullError` naming the file and the
space it needed, the temporary file removed. A command that writes a directory holds its lock (`lock_dir`): a
second writer is refused with the holder named; work several processes would each do once waits on `waiting_lock`.
"""

from litebert.io.configs import check_types, field_flag, field_label, flag_of, from_dict
from litebert.io.files import (
    COMPRESSION_SUFFIXES,
    READ_ERRORS,
    check_dir_path,
    check_input_file,
    check_not_an_input,
    check_utf8_path,
    format_suffix,
    make_dir,
    open_bytes,
)
from litebert.io.jsonfiles import read_json, write_json
from litebert.io.locks import LOCK_FILE, DirectoryInUseError, DirectoryLock, lock_dir, waiting_lock
from litebert.io.writes import (
    DiskFullError,
    atomic_dir,
    atomic_path,
    check_whole,
    copy_file,
    fsync_path,
    is_disk_full,
    naming_full_disk,
    settle,
    staged_files,
    temporary_name,
    unfinished_files,
    write_bytes,
    writing_dir,
)

__all__ = [
    "COMPRESSION_SUFFIXES",
    "LOCK_FILE",
    "READ_ERRORS",
    "DirectoryInUseError",
    "DirectoryLock",
    "DiskFullError",
    "atomic_dir",
    "atomic_path",
    "check_dir_path",
    "check_input_file",
    "check_not_an_input",
    "check_types",
    "check_utf8_path",
    "check_whole",
    "copy_file",
    "field_flag",
    "field_label",
    "flag_of",
    "format_suffix",
    "from_dict",
    "fsync_path",
    "is_disk_full",
    "lock_dir",
    "waiting_lock",
    "make_dir",
    "naming_full_disk",
    "open_bytes",
    "read_json",
    "settle",
    "staged_files",
    "temporary_name",
    "unfinished_files",
    "write_bytes",
    "write_json",
    "writing_dir",
]
