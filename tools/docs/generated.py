"""Generated files: write them, or (``--check``) say which committed ones are no longer what the code makes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Mapping

from config.stack_file import PROJECT_DIR


def write_or_check(files: Mapping[Path, str], command: str, check: bool) -> int:
    """Write each file, or with ``check`` exit status 1 naming the stale ones and the command that renews them."""
    if check:
        stale = [path for path, text in files.items()
                 if (path.read_text(encoding="utf-8") if path.is_file() else None) != text]
        if stale:
            print(f"out of date: {', '.join(path.name for path in stale)}; run: {command}", file=sys.stderr)
            return 1
        return 0
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(PROJECT_DIR) if path.is_relative_to(PROJECT_DIR) else path}")
    return 0
