#!/bin/bash
S=/work/main/benchmarks/results/store-zipf-1m-2026-12-05/cold_run.sh
for i in 1 2; do
  EXTRA_ENV= bash $S bufload-$i
  EXTRA_ENV=LIVINGRAG_DB__PREWARM_BUFFERS_FRACTION=0 bash $S noload-$i
done
