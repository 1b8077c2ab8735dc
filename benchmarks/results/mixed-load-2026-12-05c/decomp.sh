#!/bin/bash
# Interleaved bounds, 2 rounds: linear | living with the gate off | the same with the write-back
# queue at 1 (almost every candidate dropped). One JSON line per run in bounds.jsonl.
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../../.." && pwd); OUT=${OUT:-$HERE/bounds.jsonl}
cd "$ROOT" || exit 1
for round in 1 2; do
  for cfg in linear living living-wbq1; do
    d=$(mktemp -d /tmp/lrg-bound-XXXX)
    case $cfg in
      linear) b='{"mode":"linear"}'; e='{}';;
      living) b='{"ablations":["gate"]}'; e='{}';;
      living-wbq1) b='{"ablations":["gate"]}'; e='{"LIVINGRAG_API__WRITEBACK_QUEUE_SIZE":"1"}';;
    esac
    .venv/bin/python "$HERE/bound.py" "$b" 60 "$d" "$e" 2>>"$OUT.err" \
      | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); d['cfg']='$cfg'; d['round']=$round; print(json.dumps(d))" >> "$OUT"
    rm -rf "$d"
  done
done
