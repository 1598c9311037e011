"""Write (or check) the published JSON Schema of the stack files.

    python -m tools.docs.schema [--check]

Writes ``schema/stack-config.schema.json`` from ``config.schema.stack_file_schema()``, which reads
it off the config loader. ``--check`` writes nothing and exits 1 when the committed file is stale.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Optional, Sequence

from config.schema import stack_file_schema
from config.stack_file import PROJECT_DIR
from tools.docs.generated import write_or_check

SCHEMA_FILE = PROJECT_DIR / "schema" / "stack-config.schema.json"


def render() -> str:
    return json.dumps(stack_file_schema(), indent=2, sort_keys=False) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.docs.schema", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed schema is out of date")
    args = parser.parse_args(argv)
    return write_or_check({SCHEMA_FILE: render()}, "python -m tools.docs.schema", args.check)


if __name__ == "__main__":
    sys.exit(main())
