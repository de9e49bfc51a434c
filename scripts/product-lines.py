#!/usr/bin/env python3
"""Lines of product code, the measure issue 13 asks for: non-blank, non-comment lines of the
.rs files below the given folders, up to each file's first `#[cfg(test)]` (unit tests sit at
the end of a file). A module declared under `#[cfg(test)]` or `#[cfg(feature = …)]` (test
support such as core's `fixtures`, which only the tests' dev-dependencies enable) is not
product code and is left out. Default: the binary, core and live crates (no lab, no tests)."""
import pathlib
import re
import sys

GATED = re.compile(r"#\[cfg\((test|feature\s*=[^)]*)\)\]\s*\n\s*(?:pub(?:\([a-z]+\))?\s+)?mod\s+(\w+)\s*;")


def gated_files(root):
    """Files of modules declared behind a test or feature cfg."""
    out = set()
    for path in pathlib.Path(root).rglob("*.rs"):
        text = path.read_text()
        base = path.parent if path.name in ("lib.rs", "main.rs", "mod.rs") else path.with_suffix("")
        for m in GATED.finditer(text):
            name = m.group(2)
            out.add(base / f"{name}.rs")
            out.update((base / name).rglob("*.rs"))
    return out


roots = sys.argv[1:] or ["src", "crates/readygap-core/src", "crates/readygap-live/src"]
total = 0
for root in roots:
    n_root = 0
    skip = gated_files(root)
    for path in sorted(pathlib.Path(root).rglob("*.rs")):
        if path in skip:
            print(f"   left out (cfg-gated): {path}")
            continue
        for line in path.read_text().splitlines():
            t = line.strip()
            if t.startswith("#[cfg(test)]"):
                break
            if t and not t.startswith("//"):
                n_root += 1
    print(f"{n_root:>7}  {root}")
    total += n_root
print(f"{total:>7}  total")
