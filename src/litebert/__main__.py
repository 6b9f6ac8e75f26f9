"""`python -m litebert ...`, the `litebert` command without its script: also `torchrun -m litebert pretrain ...`."""

import sys

from litebert.cli import main

if __name__ == "__main__":
    sys.exit(main())
