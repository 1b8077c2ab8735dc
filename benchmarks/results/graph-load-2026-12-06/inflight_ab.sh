#!/bin/bash
# after-code (HEAD), in-flight cap per worker: default 8 | 4 | 3
OUT=/work/runs/s38/inflight_ab.jsonl
for round in 1 2; do
  for v in 8 4 3; do
    e="{\"LIVINGRAG_API__TENANT_MAX_INFLIGHT\":\"$v\"}"
    d=$(mktemp -d /tmp/lrg-if-XXXX)
    (cd /work/main && timeout 400 /work/main/.venv/bin/python benchmarks/results/mixed-load-2026-12-05c/bound.py '{"ablations":["gate"]}' 60 "$d" "$e" 2>>$OUT.err \
      | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); d['cfg']='inflight$v'; d['round']=$round; d['commit']='$(git -C /work/main rev-parse --short HEAD)'; d['at']='$(date -u +%H:%M)'; print(json.dumps(d))" >> $OUT)
    rm -rf "$d"; sleep 10
  done
done
