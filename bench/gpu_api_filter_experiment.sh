#!/usr/bin/env bash
# Which way of choosing CUPTI's API-call records costs a job less, on the GPU
# machine: per-callback-id enabling inside CUPTI (the default) or the whole
# runtime/driver kinds with the shim filtering (GPUOS_CUPTI_API_FILTER=shim).
# Raw launch loop and small training loop, untraced and both ways, 4
# alternating rounds, medians.   OUT=dir bench/gpu_api_filter_experiment.sh
set -u
OUTD=$OUT; B=build-gpu
nvcc -O2 -arch=native -o $OUTD/clr bench/cuda_launch_rate.cu
: > $OUTD/r.jsonl
for round in 1 2 3 4; do
 for v in untraced cupti shim; do
  for w in raw py; do
   if [ $w = raw ]; then cmd="$OUTD/clr"; else cmd="python3 bench/gpu_overhead.py --mode train"; fi
   case $v in
    untraced) line=$($cmd 2>/dev/null | tail -1);;
    cupti) line=$($B/gpuos-trace -q -o $OUTD/x.gpuos -- $cmd 2>/dev/null | tail -1);;
    shim) line=$(GPUOS_CUPTI_API_FILTER=shim $B/gpuos-trace -q -o $OUTD/x.gpuos -- $cmd 2>/dev/null | tail -1);;
   esac
   echo "{\"v\":\"$v\",\"w\":\"$w\",\"r\":${line:-null}}" >> $OUTD/r.jsonl
  done
 done
done
python3 - $OUTD/r.jsonl <<'PY'
import json,sys,statistics
d={}
for l in open(sys.argv[1]):
    r=json.loads(l)
    if r["r"]: d.setdefault((r["w"],r["v"]),[]).append(r["r"]["rate"])
for w in ("raw","py"):
    b=statistics.median(d[(w,"untraced")])
    for v in ("untraced","cupti","shim"):
        m=statistics.median(d[(w,v)]); print(f"{w:4} {v:9} {m:12.0f} {(1-m/b)*100:6.1f}% n={len(d[(w,v)])}")
PY
