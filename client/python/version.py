#!/usr/bin/env python3
"""Print the version of the muster meson project (its one project(version:)),
so the Python package's project and wheel carry the same version."""

import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent / "../..")
text = (root / "meson.build").read_text()
match = re.search(r"project\((?:[^()]|\([^()]*\))*?version\s*:\s*'([^']+)'", text, re.S)
if not match:
    sys.exit("no project(version : '...') in " + str(root / "meson.build"))
print(match.group(1))
