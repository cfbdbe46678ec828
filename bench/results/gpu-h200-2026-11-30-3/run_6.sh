#!/bin/bash
# session 18, device call 6 (nvidia-h200-x2): call 5 again with TORCH_NCCL_AVOID_RECORD_STREAMS=0 (the
# command the device tool ran; run_5.sh wrote log5/ddp.json, renamed here to log6/ddp6.json).
export TORCH_NCCL_AVOID_RECORD_STREAMS=0 && bash .gpu-stage/s18/run_5.sh && mv $OUT/log5.txt $OUT/log6.txt && mv $OUT/ddp.json $OUT/ddp6.json && mv $OUT/logs5.tgz $OUT/logs6.tgz
