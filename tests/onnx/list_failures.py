"""Write tests/onnx/expected_failures.txt from the output of `might onnx-test DIR` (stdin).

The list may only shrink: use this to drop cases that now pass, and check the diff removes
lines only (`git diff tests/onnx/expected_failures.txt`).
"""
import re
import sys

HEADER = """# ONNX backend node tests that might does not pass yet (see crates/might-cli/tests/onnx_node_suite.rs).
# This list may only shrink: a case not listed here that fails is a CI failure. When a case starts
# passing, `might onnx-test` says so: delete its line (tests/onnx/list_failures.py rewrites it).
# Generated from onnx 1.23.2.
"""

out = []
for line in sys.stdin:
    line = line.rstrip("\n")
    for tag in ("FAIL", "UNSUPPORTED"):
        if line.startswith(tag + " "):
            name, _, why = line[len(tag):].strip().partition(": ")
            why = re.sub(r"\S*/model\.onnx: ", "", why)
            why = re.sub(r" \(at [^)]*\)", "", why)
            out.append(f"{name:<60} # {tag.lower()}: {why[:110]}")
path = sys.argv[1] if len(sys.argv) > 1 else "tests/onnx/expected_failures.txt"
with open(path, "w") as f:
    f.write(HEADER + "\n" + "\n".join(out) + "\n")
print(f"{len(out)} expected failures written to {path}")
