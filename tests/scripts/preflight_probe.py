"""Runs Phalanx's preflight with a short timeout; the rank named in argv[1] arrives too late, as a
rank on a broken node would."""

import sys
import time
from datetime import timedelta

import torch.distributed as dist

from phalanx.trainer import distributed

timeouts = distributed.Timeouts(preflight=timedelta(seconds=3))
with distributed.failures_as_exit_codes():
    distributed.init(timeouts)
    if dist.get_rank() == int(sys.argv[1]):
        time.sleep(30)
    distributed.preflight(timeouts)
