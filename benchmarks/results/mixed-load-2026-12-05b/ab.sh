#!/bin/bash
# Interleaved before/after pairs, serve --workers 2, 60 s each. BEFORE and AFTER are source trees
# (git worktrees); PAUSE_PGID, when set, is a process group stopped during each run (a long
# evaluation sharing the machine) and continued after it.
set -u
BEFORE=${BEFORE:-/work/ab-before}; AFTER=${AFTER:-/work/main}; ROUNDS=${ROUNDS:-2}
OUT=${OUT:-/work/runs/ab2/ab.jsonl}; HARNESS=$(cd "$(dirname "$0")" && pwd)/load_run.py
for round in $(seq "${FIRST_ROUND:-1}" "$((${FIRST_ROUND:-1} + ROUNDS - 1))"); do
  for v in before after; do
    if [ $v = before ]; then src=$BEFORE; else src=$AFTER; fi
    d=$(mktemp -d /tmp/lrg-load-XXXX)
    [ -n "${PAUSE_PGID:-}" ] && kill -STOP -"$PAUSE_PGID"
    r=$(cd "$src" && timeout 400 /work/main/.venv/bin/python "$HARNESS" "$src" 2 60 "$d" 2>>"$OUT.err" | tail -1)
    [ -n "${PAUSE_PGID:-}" ] && kill -CONT -"$PAUSE_PGID"
    echo "{\"version\": \"$v\", \"commit\": \"$(git -C "$src" rev-parse --short HEAD)\", \"round\": $round, \"run\": ${r:-null}}" >> "$OUT"
    rm -rf "$d"
    sleep 20
  done
done
