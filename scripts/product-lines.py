#!/usr/bin/env python3
"""Lines of product code, the measure issue 13 asks for: non-blank, non-comment lines of the
.rs files below the given folders, up to each file's first `#[cfg(test)]` (unit tests sit at
the end of a file). Default: the binary, core and live crates (no lab, no tests)."""
import pathlib
import sys

roots = sys.argv[1:] or ["src", "crates/readygap-core/src", "crates/readygap-live/src"]
total = 0
for root in roots:
    n_root = 0
    for path in sorted(pathlib.Path(root).rglob("*.rs")):
        for line in path.read_text().splitlines():
            t = line.strip()
            if t.startswith("#[cfg(test)]"):
                break
            if t and not t.startswith("//"):
                n_root += 1
    print(f"{n_root:>7}  {root}")
    total += n_root
print(f"{total:>7}  total")
