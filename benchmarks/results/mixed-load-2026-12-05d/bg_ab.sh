#!/bin/bash
# interleaved: before (c804534) | lock (HEAD, background refresh off) | lock+bg (HEAD)
OUT=/work/runs/s37/bg_ab.jsonl
for round in 1 2; do
  for v in before lock lockbg; do
    case $v in
      before) src=/work/ab-before; e='{}';;
      lock) src=/work/main; e='{"LIVINGRAG_API__GRAPH_REFRESH_IN_BACKGROUND":"false"}';;
      lockbg) src=/work/main; e='{}';;
    esac
    d=$(mktemp -d /tmp/lrg-bg-XXXX)
    (cd $src && timeout 400 /work/main/.venv/bin/python $src/benchmarks/results/mixed-load-2026-12-05c/bound.py '{"ablations":["gate"]}' 60 "$d" "$e" 2>>$OUT.err \
      | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); d['cfg']='$v'; d['round']=$round; d['commit']='$(git -C $src rev-parse --short HEAD)'; print(json.dumps(d))" >> $OUT)
    rm -rf "$d"; sleep 10
  done
done
