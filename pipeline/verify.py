"""`python -m pipeline.verify`: hash every DVC cache object and every output dvc.lock records; change nothing.

Plain `dvc repro`, `dvc status` and `dvc checkout` trust DVC's cache objects, and an output whose inode, size and
mtime did not change: they say "up to date" over a corrupt object or bytes changed in place. Run this after them and
before `dvc push` (CI runs it): exit 0 when each file holds its recorded bytes, else 1, naming each one that does
not; `python -m pipeline.repro` replaces those (pipeline.base.integrity).
"""

import sys

from pipeline.base import integrity
from pipeline.base.paths import checkout_root

if __name__ == "__main__":
    if sys.argv[1:]:  # --help, or a mistake: the usage
        print(__doc__)
        raise SystemExit(0 if sys.argv[1:] in (["-h"], ["--help"]) else 2)
    found = integrity.check(checkout_root(), repair=False)
    if found:
        print("\n".join(f"verify: {problem}" for problem, _ in found), file=sys.stderr)
        raise SystemExit(f"verify: {len(found)} file(s) corrupt. Fix: `python -m pipeline.repro` replaces them")
    print("verify: every DVC cache object and every output dvc.lock records holds its recorded bytes")
