#!/bin/bash
# mixed load against 2Wiki's corpus (6,127 passages), interleaved: before (181042f) | after (HEAD)
OUT=/work/runs/s38/w2_ab.jsonl
for round in 1 2; do
  for v in before after; do
    case $v in
      before) src=/work/ab-before; data=/work/lrg-2wiki-0008;;
      after) src=/work/main; data=/work/lrg-2wiki;;
    esac
    rm -rf /tmp/w2-run && cp -a $data /tmp/w2-run
    (cd $src && timeout 500 /work/main/.venv/bin/python /work/runs/s38/bound_corpus.py $src /tmp/w2-run 60 1 1 2>>$OUT.err \
      | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); d['cfg']='$v'; d['round']=$round; d['commit']='$(git -C $src rev-parse --short HEAD)'; d['at']='$(date -u +%H:%M)'; print(json.dumps(d))" >> $OUT)
    rm -rf /tmp/w2-run; sleep 10
  done
done
