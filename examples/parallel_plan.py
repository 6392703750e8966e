"""What the parallel executor runs at once, and why: the plan of an inception-like block.

    python examples/parallel_plan.py

The first call of a process with ``executor="parallel"`` calibrates the machine (about two
seconds, then cached in ember's cache directory); the plan lists each worker's nodes, what each
waits for on another worker, and the predicted sequential and parallel times. On a machine
whose cores are busy the model predicts no gain and the program runs the generated code.
"""

import ember
from ember import models
from ember.runtime import parallel_cost

args = [ember.randn(*shape) for shape in models.inception_shapes(8, 32, 16)]
block = ember.function(models.inception_block, executor="parallel")
program = block.compile(*args)
print(parallel_cost.calibrate())  # this machine's measured costs
print(program.parallel_plan)  # sequential or parallel, and why
print(block(*args).shape)
