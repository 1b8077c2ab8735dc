#!/bin/bash
# interleaved before (bb79cf2: one candidate per transaction) / after (batched write-back), stages.py each
OUT=/work/runs/s36/wb_ab.txt
for round in 1 2; do
  for v in before after; do
    if [ $v = before ]; then src=/work/ab-before; else src=/work/main; fi
    d=$(mktemp -d /tmp/lrg-wb-XXXX)
    echo "== round $round $v $(git -C $src rev-parse --short HEAD)" >> $OUT
    (cd $src && timeout 400 /work/main/.venv/bin/python $src/benchmarks/results/mixed-load-2026-12-05c/stages.py '{"ablations":["gate"]}' 60 "$d" >> $OUT 2>>$OUT.err)
    rm -rf "$d"; sleep 15
  done
done
