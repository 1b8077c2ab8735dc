#!/bin/bash
# interleaved before (c804534: adds wait for the write-back's shared corpus lock) / after (d697758: evidence lock)
OUT=/work/runs/s37/lock_ab.jsonl
for round in 1 2; do
  for v in before after; do
    if [ $v = before ]; then src=/work/ab-before; else src=/work/main; fi
    d=$(mktemp -d /tmp/lrg-lk-XXXX)
    (cd $src && timeout 400 /work/main/.venv/bin/python $src/benchmarks/results/mixed-load-2026-12-05c/bound.py '{"ablations":["gate"]}' 60 "$d" 2>>$OUT.err \
      | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); d['cfg']='$v'; d['round']=$round; d['commit']='$(git -C $src rev-parse --short HEAD)'; print(json.dumps(d))" >> $OUT)
    rm -rf "$d"; sleep 10
  done
done
