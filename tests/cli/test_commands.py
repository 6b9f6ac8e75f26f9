"""The command table: every command is listed in `COMMANDS` under the module that registers it, and
`litebert --help` lists them all without importing any command's module (nor torch)."""

from __future__ import annotations

import subprocess
import sys

from litebert.cli import COMMANDS, build_parser


def _choices(parser) -> dict:
    return next(a for a in parser._actions if a.dest == "command").choices


def test_every_registered_command_is_in_the_table_under_its_module():
    full = _choices(build_parser())
    assert set(full) == set(COMMANDS)
    for name, (module, _) in COMMANDS.items():
        # asking for one command registers it in full (with its own flags), from the module the table names
        parser = build_parser([name])
        assert _choices(parser)[name].add_help, f"{name}: not registered by litebert.cli.{module}"
        assert parser.prog == "litebert"


def test_top_level_help_imports_no_command_module_and_no_torch():
    code = (
        "import sys\n"
        "from litebert.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith(('litebert.cli.', 'litebert.model'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"
    for name in COMMANDS:
        assert name in out
