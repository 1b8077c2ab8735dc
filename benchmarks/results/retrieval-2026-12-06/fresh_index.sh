#!/bin/bash
# issue 21 targets 1 and 2 on HEAD, this VM: 2Wiki-1000 on a fresh data dir (first indexing included), then musique_reuse
set -e
cd /work/main
D=/tmp/lrg-t12; rm -rf $D; mkdir -p $D
export LIVINGRAG_DB__DATA_DIR=$D
date -u
.venv/bin/livingrag bench retrieval --dataset 2wikimultihopqa --data-dir ../shared/datasets/2wikimultihopqa --json -q > /work/runs/s39/t12/retrieval-2wikimultihopqa.json
date -u
.venv/bin/livingrag bench retrieval --dataset musique --data-dir ../shared/datasets/musique_reuse --json -q > /work/runs/s39/t12/retrieval-musique_reuse.json
date -u
