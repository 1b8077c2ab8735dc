#!/bin/bash
# interleaved, HEAD: index threads default (one per core) | 1
OUT=/work/runs/s39/threads_ab.jsonl
for round in 1 2; do
  for v in default one; do
    case $v in default) extra='{}';; one) extra='{"LIVINGRAG_MODELS__INDEX_THREADS": "1"}';; esac
    d=$(mktemp -d /tmp/lrg-th-XXXX)
    (cd /work/main && timeout 400 .venv/bin/python benchmarks/results/mixed-load-2026-12-05c/bound.py '{"ablations":["gate"]}' 60 "$d" "$extra" 2>>$OUT.err \
      | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); d['cfg']='$v'; d['round']=$round; d['at']='$(date -u +%H:%M)'; print(json.dumps(d))" >> $OUT)
    rm -rf "$d"; sleep 10
  done
done
