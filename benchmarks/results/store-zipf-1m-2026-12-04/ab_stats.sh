#!/bin/bash
cd /work/main
for arm in "$@"; do
  if [ $arm = nostats ]; then SQL="DROP STATISTICS IF EXISTS experiences_scope_stats"; else SQL="CREATE STATISTICS IF NOT EXISTS experiences_scope_stats (dependencies, mcv) ON tenant_id, corpus_id FROM experiences"; fi
  SQL="$SQL" timeout 300 .venv/bin/python - <<'PY'
import os
from pathlib import Path
from livingrag.db.embedded import start_embedded
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
s = start_embedded(Path("/work/lrg-1mz"), prewarm=False)
url = make_url(s.url).set(database="livingrag_bench_5fde3a9595").render_as_string(hide_password=False)
e = create_engine(url, isolation_level="AUTOCOMMIT")
with e.connect() as c:
    c.execute(text(os.environ["SQL"])); c.execute(text("ANALYZE experiences"))
e.dispose()
PY
  t0=$(date +%s)
  LIVINGRAG_DB__DATA_DIR=/work/lrg-1mz timeout 900 .venv/bin/livingrag bench store --experiences 1000000 --tenants 100 --skew zipf --database livingrag_bench_5fde3a9595 --query-seed 5 --warmup 1000 --writes 40 --json > /work/runs/zipf/ab-$arm-$t0.json 2> /work/runs/zipf/ab-$arm-$t0.err
  python3 -c "
import json; d=json.load(open('/work/runs/zipf/ab-$arm-$t0.json')); tf=d['tenant_figures']
print('$arm', 'all p50/p95', d['match_ms_p50'], d['match_ms_p95'], 'median', tf['median_tenant']['match_ms_p50'], 'largest', tf['largest_tenant']['match_ms_p50'], 'deciles', [g['match_ms_p50'] for g in tf['agreement_by_size_decile']], 'agree', d['topk_agreement'])"
done
