#!/usr/bin/env python3
"""Checks that the complete FlexPipe examples in Markdown files verify.

Every ```mlir block whose first op is a `flexpipe.pipeline` or a
`flexpipe.schedule` is a complete program: it must pass flexpipe-opt. Blocks
that show a single op (fragments) are skipped. A block introduced as a file
of the repository (its paragraph ends with "`examples/NAME.mlir`:") must
also be that file, less its `//` comment lines. Prints one line per failure
and a closing 'examples: N passed, M failed' line; exits non-zero on failure.

Usage: check-doc-examples.py FLEXPIPE_OPT FILE.md...
"""

import os
import re
import subprocess
import sys

BLOCK = re.compile(r"^```mlir\n(.*?)^```", re.S | re.M)
COMPLETE = re.compile(r"^\s*(//[^\n]*\n\s*)*flexpipe\.(pipeline|schedule)\b")
# A paragraph that presents the next block as a file: "... `PATH.mlir`:".
PRESENTED = re.compile(r"`([\w./-]+\.mlir)`:\s*$")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def differs_from_file(text: str, start: int, block: str) -> str:
    """Why `block` is not the file its paragraph presents it as, or ''."""
    presented = PRESENTED.search(text[:start])
    if not presented:
        return ""
    path = os.path.join(ROOT, presented.group(1))
    if not os.path.exists(path):
        return f"presented as {presented.group(1)}, which does not exist"
    with open(path, encoding="utf-8") as f:
        body = "".join(l for l in f if not l.lstrip().startswith("//"))
    if body.strip() != block.strip():
        return (f"presented as {presented.group(1)}, but the file (less its "
                "comments) says otherwise")
    return ""


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    opt, files = sys.argv[1], sys.argv[2:]
    passed = failed = 0
    for path in files:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for match in BLOCK.finditer(text):
            block = match.group(1)
            if not COMPLETE.match(block):
                continue
            line = text.count("\n", 0, match.start()) + 2
            result = subprocess.run([opt, "-", "-o", "/dev/null"], input=block,
                                    capture_output=True, text=True)
            mismatch = differs_from_file(text, match.start(), block)
            if result.returncode != 0:
                failed += 1
                print(f"FAIL: {path}:{line}: example does not verify:\n"
                      f"{result.stderr.strip()}")
            elif mismatch:
                failed += 1
                print(f"FAIL: {path}:{line}: example {mismatch}")
            else:
                passed += 1
    print(f"examples: {passed} passed, {failed} failed")
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
