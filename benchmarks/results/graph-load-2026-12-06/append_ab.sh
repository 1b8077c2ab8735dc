#!/bin/bash
# interleaved mixed-load runs: before (181042f) | after (aa6e8aa, appended graph loads)
OUT=/work/runs/s38/append_ab.jsonl
for round in 1 2 3; do
  for v in before after; do
    case $v in
      before) src=/work/ab-before;;
      after) src=/work/main;;
    esac
    d=$(mktemp -d /tmp/lrg-ap-XXXX)
    (cd $src && timeout 400 /work/main/.venv/bin/python $src/benchmarks/results/mixed-load-2026-12-05c/bound.py '{"ablations":["gate"]}' 60 "$d" '{}' 2>>$OUT.err \
      | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); d['cfg']='$v'; d['round']=$round; d['commit']='$(git -C $src rev-parse --short HEAD)'; d['at']='$(date -u +%H:%M)'; print(json.dumps(d))" >> $OUT)
    rm -rf "$d"; sleep 10
  done
done
