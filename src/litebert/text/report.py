"""What a read of a corpus found: counts, and messages naming every file, line or byte offset skipped or repaired."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

log = logging.getLogger("litebert.text")
_MAX_MESSAGES = 200


@dataclass(kw_only=True)
class TextReport:
    """Counts of one read, and messages naming every file/line/byte offset that was skipped or repaired."""

    files: int = 0
    documents: int = 0
    sentences: int = 0
    characters: int = 0
    skipped: int = 0  # files or records left out (binary files, bad JSON lines, records without text)
    invalid_bytes: int = 0  # undecodable UTF-8 sequences, each replaced by U+FFFD
    messages: list[str] = field(default_factory=list)

    def note(self, message: str) -> None:
        # Kept and logged up to a bound: a long run over a damaged corpus must not flood memory or stderr.
        if len(self.messages) < _MAX_MESSAGES:
            self.messages.append(message)
            log.warning(message)
        elif len(self.messages) == _MAX_MESSAGES:
            self.messages.append("... further messages left out (the counts stay exact)")
            log.warning(self.messages[-1])

    def summary(self) -> str:
        return (
            f"files {self.files:,}  documents {self.documents:,}  sentences {self.sentences:,}  "
            f"characters {self.characters:,}  skipped {self.skipped:,}  invalid bytes {self.invalid_bytes:,}"
        )
