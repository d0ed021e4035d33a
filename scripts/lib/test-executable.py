"""Prints the path of the test executable NAME from cargo's JSON build report on stdin
(`cargo test --no-run --message-format=json...`): scripts/test.sh and
tests/softroce/run-all.sh find the verbs_errors test this way."""
import json
import sys

name = sys.argv[1]
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == name:
        print(m["executable"])
