#!/bin/bash
# interleaved: graph_check_interval_s 0 (default) vs 0.5, HEAD working tree, INFO logs kept per run
OUT=/work/runs/s37/interval_ab.jsonl
cd /work/main
for round in 1 2; do
  for v in i0 i05; do
    case $v in
      i0) e='{"LIVINGRAG_LOG_LEVEL":"INFO"}';;
      i05) e='{"LIVINGRAG_LOG_LEVEL":"INFO","LIVINGRAG_API__GRAPH_CHECK_INTERVAL_S":"0.5"}';;
    esac
    d=$(mktemp -d /tmp/lrg-iv-XXXX)
    timeout 400 .venv/bin/python benchmarks/results/mixed-load-2026-12-05c/bound.py '{"ablations":["gate"]}' 60 "$d" "$e" 2>>$OUT.err \
      | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); d['cfg']='$v'; d['round']=$round; print(json.dumps(d))" >> $OUT
    cp /tmp/lrg-bound.log /work/runs/s37/server-$v-$round.log
    rm -rf "$d"; sleep 10
  done
done
