#!/usr/bin/env python3
"""The repository stands alone: nothing in it outside .ci/ refers to a path above its root.

A user's clone has nothing beside it. This fails (exit 1, naming file and line) when a file
the repository tracks, or an untracked one git does not ignore, names the folder CI keeps
beside the clone (`../shared`, `shared/lab-data`, `shared/design`, `shared/hooks`), or holds a
relative path whose `../` steps climb above the repository from where that path is resolved:
the file's own folder, or, on a line that joins onto `CARGO_MANIFEST_DIR`, the folder of the
package's Cargo.toml. .ci/ itself may name the folder (this file does, to look for it).

Usage: python3 .ci/repo-bounds.py [REPO]   (default: the repository this file is in)
"""
import pathlib
import re
import subprocess
import sys

SHARED = re.compile(r"\.\./+shared\b|(?<![\w.-])shared/(?:lab-data|design|hooks)\b")
CLIMB = re.compile(r"(?<![\w.])((?:\.\./)+)")


def files(repo: pathlib.Path):
    out = subprocess.run(
        ["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        check=True,
        capture_output=True,
    ).stdout
    for name in out.decode().split("\0"):
        if name and not name.startswith(".ci/"):
            yield pathlib.PurePosixPath(name)


def package_root(repo: pathlib.Path, rel: pathlib.PurePosixPath) -> pathlib.PurePosixPath:
    """The folder of the nearest Cargo.toml above a file (the repository root if none)."""
    for parent in rel.parents:
        if (repo / parent / "Cargo.toml").is_file():
            return parent
    return pathlib.PurePosixPath(".")


def depth(p: pathlib.PurePosixPath) -> int:
    return len([part for part in p.parts if part != "."])


def main() -> int:
    repo = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
    repo = repo.resolve()
    found = []
    for rel in files(repo):
        path = repo / rel
        try:
            data = path.read_bytes()
        except OSError:
            continue  # a file listed but deleted in the working tree
        if b"\0" in data[:8192]:
            continue  # binary
        text = data.decode("utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            if SHARED.search(line):
                found.append(f"{rel}:{number}: names the folder beside the clone: {line.strip()}")
                continue
            base = package_root(repo, rel) if "CARGO_MANIFEST_DIR" in line else rel.parent
            for m in CLIMB.finditer(line):
                ups = m.group(1).count("../")
                if ups > depth(base):
                    found.append(
                        f"{rel}:{number}: climbs {ups} folders from {base}/, above the repository: {line.strip()}"
                    )
                    break
    for f in found:
        print(f"repo-bounds: {f}")
    if found:
        print(
            f"repo-bounds: {len(found)} reference(s) above the repository; a clone has nothing beside it",
            file=sys.stderr,
        )
        return 1
    print("repo-bounds: nothing refers to a path above the repository")
    return 0


if __name__ == "__main__":
    sys.exit(main())
