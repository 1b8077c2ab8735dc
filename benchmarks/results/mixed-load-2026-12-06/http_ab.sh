#!/bin/bash
# interleaved, HEAD: uvicorn on h11 + asyncio (as shipped) | on httptools + uvloop (installed)
OUT=/work/runs/s39/http_ab.jsonl
PIP=/work/main/.venv/bin/pip
for round in 1 2 3; do
  for v in h11 fast; do
    case $v in
      h11) $PIP uninstall -q -y httptools uvloop >/dev/null 2>&1;;
      fast) $PIP install -q --no-index /tmp/wheels/httptools-*.whl /tmp/wheels/uvloop-*.whl >/dev/null 2>&1;;
    esac
    d=$(mktemp -d /tmp/lrg-http-XXXX)
    (cd /work/main && timeout 400 .venv/bin/python benchmarks/results/mixed-load-2026-12-05c/bound.py '{"ablations":["gate"]}' 60 "$d" '{}' 2>>$OUT.err \
      | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); d['cfg']='$v'; d['round']=$round; d['at']='$(date -u +%H:%M)'; print(json.dumps(d))" >> $OUT)
    rm -rf "$d"; sleep 10
  done
done
