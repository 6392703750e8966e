"""What the parallel executor runs at once, and why: the plan of an inception-like block.

    python examples/parallel_plan.py

The first call of a process with ``executor="parallel"`` calibrates the machine (about two
seconds, then cached in ember's cache directory); the plan lists each worker's nodes, what each
waits for on another worker, and the predicted sequential and parallel times. On a machine
whose cores are busy the model predicts no gain and the program runs the generated code.
"""

import ember
import ember.nn.functional as F
from ember.runtime import parallel_cost


def inception(x, w1, w2a, w2b, w3a, w3b, w4):
    b1 = F.relu(F.conv2d(x, w1))
    b2 = F.relu(F.conv2d(F.relu(F.conv2d(x, w2a)), w2b, padding=1))
    b3 = F.relu(F.conv2d(F.relu(F.conv2d(x, w3a)), w3b, padding=2))
    b4 = F.relu(F.conv2d(F.max_pool2d(x, 3, stride=1, padding=1), w4))
    return ember.cat([b1, b2, b3, b4], dim=1)


shapes = [(8, 32, 16, 16), (16, 32, 1, 1), (16, 32, 1, 1), (32, 16, 3, 3), (8, 32, 1, 1)]
shapes += [(16, 8, 5, 5), (16, 32, 1, 1)]
args = [ember.randn(*s) for s in shapes]
block = ember.function(inception, executor="parallel")
program = block.compile(*args)
print(parallel_cost.calibrate())  # this machine's measured costs
print(program.parallel_plan)  # sequential or parallel, and why
print(block(*args).shape)
