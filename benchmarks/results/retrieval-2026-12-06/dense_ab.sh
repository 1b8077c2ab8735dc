#!/bin/bash
# interleaved bench retrieval on one index (/tmp/lrg-t12): before = a2801f0 (dense term awaited in encode) | after = working tree
# ROUNDS and SETS (dataset:folder pairs) name the runs; the second batch of dense_ab.jsonl was
#   ROUNDS="4 5 6 7" SETS="2wikimultihopqa:2wikimultihopqa" bash dense_ab.sh
OUT=/work/runs/s39/dense_ab.jsonl
ROUNDS=${ROUNDS:-1 2 3}
SETS=${SETS:-2wikimultihopqa:2wikimultihopqa musique:musique_reuse}
export LIVINGRAG_DB__DATA_DIR=/tmp/lrg-t12
for round in $ROUNDS; do
  for v in before after; do
    case $v in before) src=/work/ab-head;; after) src=/work/main;; esac
    for ds in $SETS; do
      name=${ds%%:*}; dir=${ds##*:}
      (cd $src && /work/main/.venv/bin/python -m livingrag.cli.main bench retrieval --dataset $name --data-dir /work/main/../shared/datasets/$dir --json -q 2>>$OUT.err \
        | python3 -c "import json,sys; d=json.load(sys.stdin); d['cfg']='$v'; d['round']=$round; d['data']='$dir'; d['at']='$(date -u +%H:%M:%S)'; print(json.dumps(d))" >> $OUT)
    done
  done
done
