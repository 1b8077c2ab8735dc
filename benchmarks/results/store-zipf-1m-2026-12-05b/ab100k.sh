#!/bin/bash
for i in 1 2; do
  SRC=/work/ab-before bash /work/runs/s37/cold100k.sh idx-$i
  SRC=/work/main bash /work/runs/s37/cold100k.sh heap-$i
done
