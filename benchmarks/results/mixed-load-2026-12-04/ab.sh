#!/bin/bash
# interleaved: workers 1, 2, 1, 2; a fresh data dir each run
for w in 1 2 1 2; do
  d=$(mktemp -d /tmp/lrg-load-XXXX)
  /work/main/.venv/bin/python "$(dirname "$0")/load_run.py" $w 60 $d 2>>ab.err | tail -1
  rm -rf $d
done
