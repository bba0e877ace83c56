#!/bin/sh
# The repository's setup: byte-compile it and build the test fixtures (a few thousand cases,
# computed slowly on purpose: it stands in for installing dependencies, which takes a while).
set -eu
cd "$(dirname "$0")"
python3 -m compileall -q calc tests
mkdir -p build
python3 - <<'PY'
import json, random, time
random.seed(7)
cases = []
for i in range(400):
    xs = [random.randint(-1000, 1000) for _ in range(random.randint(1, 50))]
    cases.append({"xs": xs, "mean": sum(xs) / len(xs)})
    time.sleep(0.01)
with open("build/fixtures.json", "w") as f:
    json.dump(cases, f)
PY
sleep "${SETUP_EXTRA_SECONDS:-4}"
echo "setup done"
