"""A job where rank 1 fails (MODE "raise": an exception; "kill": SIGKILL; "stall": it never
arrives; "diverge": it waits in a recv instead) while rank 0 waits in an all_reduce: the job must
end with a non-zero status instead of hanging (for "stall" and "diverge", through the group's
timeout, 3 s here, the error naming rank 1)."""

import datetime
import os
import signal
import sys
import time

import ember
import ember.distributed as dist

mode = sys.argv[1]
timeout_s = 3 if mode in ("stall", "diverge") else 20
dist.init_process_group(timeout=datetime.timedelta(seconds=timeout_s))
if dist.get_rank() == 1:
    if mode == "raise":
        raise RuntimeError("rank 1 fails on purpose")
    if mode == "stall":
        time.sleep(100)
    if mode == "diverge":
        dist.recv(ember.zeros(3), 0)
    os.kill(os.getpid(), signal.SIGKILL)
dist.all_reduce(ember.ones(3))
print("rank 0 finished the all_reduce: the failure went unnoticed")
