"""Worker rank argv[1] raises in user code after joining; the others wait in a collective."""

import os
import sys

import torch
import torch.distributed as dist

from phalanx.trainer import distributed

with distributed.failures_as_exit_codes():
    distributed.init(distributed.Timeouts())
    if int(os.environ["RANK"]) == int(sys.argv[1]):
        raise ZeroDivisionError("the user's bug")
    dist.all_reduce(torch.ones(1))
