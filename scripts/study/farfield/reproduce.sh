#!/bin/sh
# Reproduces every number in REPORT.md (about 12 min CPU on one core). Caches: cache/ (16 kHz signals, MC-WPE outputs).
set -e
cd "$(dirname "$0")"   # outputs (logs/, results/, out/) land here; inputs: prepare.py
mkdir -p logs results
N="nice -n 10 python3"
$N anchors.py | tee logs/anchors.txt                                   # mic0 + offline anchors -> results/anchors.json
B=omvdr:0.01:1.0:0:gam; B4=omvdr:0.01:1.0:0:gam:nf:4; W1=wpe1:6:3:0.995:geo:128:2
# 2-4: beams
$N run.py mic0 das sd:nf:-10 sd:ff:-10 sd:nf:0 sd:ff:0 sd:nf:-15 sd:nf:-6
$N run.py omvdr:0.01:1.0 omvdr:0.1:1.0 omvdr:0.001:1.0 $B omvdr:0.001:1.0:25 omvdr:0.001:0.5 omvdr:0.001:3.0 omvdr:0.0001:1.0 $B4 $B4:-10 omvdr:0.001:1.0:0:gam:nf:4:-10
# 5: multichannel online WPE; grid on 3 rooms
C=""; for K in 6 10; do for dl in 2 3; do for a in 0.99 0.995 0.998; do C="$C wpe:$K:$dl:$a+sd:nf:-10"; done; done; done
$N run.py --rooms=near-0.8m,mid-1.6m,far-3m $C | grep -v "^$" > logs/wpegrid.txt
$N run.py wpe:10:3:0.99+$B wpe:10:3:0.995+sd:nf:-10 wpe:10:3:0.995+$B wpe:10:3:0.998+sd:nf:-10 wpe:10:3:0.998+$B wpe:6:3:0.998+sd:nf:-10 wpe:6:3:0.998+$B \
    wpe:10:3:0.995:all:1:pred+$B wpe:10:3:0.995:all:1:geo+$B wpe:10:3:0.995:all:1:geo+sd:nf:-10 wpe:10:3:0.995:all:1:geo+mic0 wpe:10:3:0.995+mic0 \
    wpe:10:4:0.995:all:1:geo+$B wpe:6:3:0.995:all:1:geo+$B wpe:10:3:0.99:all:1:geo+$B wpe:10:3:0.998:all:1:geo+$B wpe:10:3:0.995:all:1:geo+das
# 5': single-channel WPE on the beam
$N run.py $B+wpe1:10:3:0.995 $B+wpe1:10:3:0.995:geo sd:nf:-10+wpe1:10:3:0.995 $B+wpe1:6:3:0.995 $B+wpe1:10:2:0.995 $B+wpe1:16:3:0.995 $B+wpe1:10:3:0.998
# 6/7: post-filters and chains
$N run.py $B+lr:true:0.05:-12 $B+lr:0.5:0.05:-12 $B+lrn:true:0.05:-12 $B+lrn:0.5:0.05:-12 $B+ns:-12 $B+mcc:-12 $B+zel:-12
$N run.py $B+wpe1:10:3:0.995:geo+lr:true:0.05:-12 $B+wpe1:10:3:0.995:geo+lrn:true:0.05:-12 wpe:10:3:0.995:all:1:geo+$B+lr:true:0.05:-12 \
    wpe:10:3:0.995:all:1:geo+$B+lr:true:0.05:-12:0.5 $B+lr:true:0.05:-9 $B+lr:true:0.05:-15 $B+lr:true:0.08:-12 $B+lr:true:0.032:-12 $B+lr:0.4:0.05:-12 \
    $B+lr:0.5:0.05:-12:0.5 sd:nf:-10+lr:true:0.05:-12
P=lr:true:0.05:-12:0.5
$N run.py wpe:10:3:0.995:128:1:geo+$B+$P wpe:10:3:0.995:64:1:geo+$B+$P wpe:6:3:0.995:all:1:geo+$B+$P wpe:10:3:0.995:all:2:geo+$B+$P wpe:6:3:0.995:128:2:geo+$B+$P
L=lr:0.5:0.05:-12:0.5
$N run.py $B4+lr:true:0.05:-12 sd:nf:-10+$L sd:nf:-10+$P $B+$P sd:nf:-10+wpe1:10:3:0.995:geo+lr:true:0.05:-12 $B+$W1+lr:true:0.05:-12 $B+$W1+$L \
    $B+wpe1:10:3:0.995:geo:all:2+lr:true:0.05:-12 $B+zel:-12+$P
$N run.py $B+zel:-12+$L sd:nf:-10+zel:-12+$L sd:nf:-10+zel:-12+$P $B+mcc:-12+$P $B+zel:-9+$P $B+zel:-15+$P $B+$W1+zel:-12+$P $B+$W1+zel:-12+$L \
    wpe:6:3:0.995:128:2:geo+$B+zel:-12+$P
$N run.py $B4+zel:-12+$L $B4+zel:-12+$P $B4+$W1+zel:-12+$P $B4+$W1+zel:-12+$L $B4:-10+zel:-12+$L $B4:-10+$W1+zel:-12+$P
$N run.py sd:nf:-10+$W1+zel:-12+$L sd:nf:-10+$W1+zel:-12+$P sd:nf:-10+$W1+$L sd:nf:-10+zel:-12
# robustness: mic gain errors and self-noise
PERTURB=1:-30 $N run.py mic0 das sd:nf:-10 sd:nf:0 $B $B4 $B4+zel:-12+$L $B4+$W1+zel:-12+$P $B4:-10 omvdr:0.001:1.0:0:gam:nf:4:-10 $B4:-10+zel:-12+$L \
    sd:nf:-10+zel:-12+$L sd:nf:-10+$W1+zel:-12+$L sd:nf:-10+$W1+zel:-12+$P sd:nf:-10+$W1+$L sd:nf:-10+zel:-12
PERTURB=1:-200 $N run.py mic0 das sd:nf:-10 $B4 omvdr:0.1:1.0:0:gam:nf:4 $B4+zel:-12+$L $B4:-10 omvdr:0.001:1.0:0:gam:nf:4:-10 $B4:-10+zel:-12+$L \
    omvdr:0.01:1.0:25:gam:nf:4 omvdr:0.01:1.0:25:gam:nf:4:-10 sd:nf:-10+zel:-12+$L
PERTURB=0:-30 $N run.py mic0 das sd:nf:-10 $B4 omvdr:0.1:1.0:0:gam:nf:4 $B4+zel:-12+$L
$N check_nara.py | tee logs/check_nara.txt
# tables
python3 report_tables.py > tables.md      # main table, WPE grid, perturbed tables; writes RESULTS_ALL.md
python3 cost.py                            # stage cost table
