"""A job where rank 1 fails (MODE "raise": an exception; "kill": SIGKILL) while rank 0 waits in
an all_reduce: the job must end with a non-zero status instead of hanging."""

import datetime
import os
import signal
import sys

import ember
import ember.distributed as dist

mode = sys.argv[1]
dist.init_process_group(timeout=datetime.timedelta(seconds=20))
if dist.get_rank() == 1:
    if mode == "raise":
        raise RuntimeError("rank 1 fails on purpose")
    os.kill(os.getpid(), signal.SIGKILL)
dist.all_reduce(ember.ones(3))
print("rank 0 finished the all_reduce: the failure went unnoticed")
