"""Print a command block of the README's quick start, so CI runs it exactly as a newcomer reads it.

    python3 .ci/readme_command.py a    # the first ```sh block after "**(a)"
"""

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def quick_start_command(label: str, text: str) -> str:
    match = re.search(rf"^\*\*\({re.escape(label)}\).*?^```sh\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    if match is None:
        raise SystemExit(f"README.md has no quick start ({label}) with a ```sh block")
    return match.group(1).strip()


if __name__ == "__main__":
    print(quick_start_command(sys.argv[1], README.read_text()))
