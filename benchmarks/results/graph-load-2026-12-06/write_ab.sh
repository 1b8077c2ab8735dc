#!/bin/bash
# interleaved: mid (719dd88: appended loads + adds at commit) | after (HEAD: the faster add write)
OUT=/work/runs/s38/write_ab.jsonl
for round in 1 2 3; do
  for v in mid after; do
    case $v in mid) src=/work/ab-mid;; after) src=/work/main;; esac
    d=$(mktemp -d /tmp/lrg-wr-XXXX)
    (cd $src && timeout 400 /work/main/.venv/bin/python $src/benchmarks/results/mixed-load-2026-12-05c/bound.py '{"ablations":["gate"]}' 60 "$d" '{}' 2>>$OUT.err \
      | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); d['corpus']='load-test'; d['cfg']='$v'; d['round']=$round; d['commit']='$(git -C $src rev-parse --short HEAD)'; d['at']='$(date -u +%H:%M)'; print(json.dumps(d))" >> $OUT)
    rm -rf "$d"; sleep 10
  done
done
for round in 1 2; do
  for v in mid after; do
    case $v in mid) src=/work/ab-mid;; after) src=/work/main;; esac
    rm -rf /tmp/w2-run && cp -a /work/lrg-2wiki /tmp/w2-run
    (cd $src && timeout 500 /work/main/.venv/bin/python /work/runs/s38/bound_corpus.py $src /tmp/w2-run 60 1 1 2>>$OUT.err \
      | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); d['corpus']='2wiki'; d['cfg']='$v'; d['round']=$round; d['commit']='$(git -C $src rev-parse --short HEAD)'; d['at']='$(date -u +%H:%M)'; print(json.dumps(d))" >> $OUT)
    rm -rf /tmp/w2-run; sleep 10
  done
done
