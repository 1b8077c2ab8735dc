#!/bin/bash
# interleaved before (b29d3b1's livingrag/) and after (HEAD), serve --workers 2, 60 s each
cd /work/main
for round in 1 2; do
  for v in before after; do
    if [ $v = before ]; then git checkout -q b29d3b1 -- livingrag; else git checkout -q HEAD -- livingrag; fi
    d=$(mktemp -d /tmp/lrg-load-XXXX)
    r=$(timeout 400 .venv/bin/python benchmarks/results/mixed-load-2026-12-04/load_run.py 2 60 $d 2>>/work/runs/ab/ab.err | tail -1)
    echo "{\"version\": \"$v\", \"round\": $round, \"run\": $r}" >> /work/runs/ab/ab.jsonl
    rm -rf $d
  done
done
git checkout -q HEAD -- livingrag
git status --short
