#!/bin/bash
# CPU seconds per process kind over 20 s of a mixed-load run (serve --workers ${1:-2}), read from
# /proc/PID/stat before and after; PAUSE_PGID: a process group stopped meanwhile (a long evaluation)
snap() { for p in /proc/[0-9]*; do pid=${p#/proc/}; read -r -a f < $p/stat 2>/dev/null || continue; c=$(tr '\0' ' ' < $p/cmdline 2>/dev/null | cut -c1-80); echo "$pid $((f[13]+f[14])) $c"; done; }
[ -n "${PAUSE_PGID:-}" ] && kill -STOP -"$PAUSE_PGID"
d=$(mktemp -d /tmp/lrg-load-XXXX)
(cd /work/main && timeout 400 .venv/bin/python benchmarks/results/mixed-load-2026-12-05b/load_run.py /work/main ${1:-2} 60 $d > ${OUT:-/tmp}/cpu-run.json 2>/dev/null) &
H=$!
for i in $(seq 1 120); do ps -eo args | grep -q "[l]ivingrag.cli.main serve" && break; sleep 1; done
sleep 40
snap > /tmp/snap1; sleep 20; snap > /tmp/snap2
wait $H; [ -n "${PAUSE_PGID:-}" ] && kill -CONT -"$PAUSE_PGID"; rm -rf $d
python3 - <<'PY'
import collections
a={l.split(' ',2)[0]:l.rstrip('\n').split(' ',2) for l in open('/tmp/snap1')}
g=collections.Counter()
for l in open('/tmp/snap2'):
    p=l.rstrip('\n').split(' ',2)
    if len(p)<3: p.append('')
    base=int(a[p[0]][1]) if p[0] in a else 0
    d=(int(p[1])-base)/100
    if d<=0: continue
    c=p[2]
    k='postgres' if 'postgres' in c else ('serve' if 'cli.main serve' in c else ('harness' if 'load_run' in c else c[:60]))
    g[k]+=d
for k,v in g.most_common(): print(f"{v:7.1f} s  {k}")
print("total", round(sum(g.values()),1), "of 40 core-s")
PY
cut -c1-330 ${OUT:-/tmp}/cpu-run.json
