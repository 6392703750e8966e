"""torch._foreach_*: lists of tensors in and out, which the OpInfo samples (arrays and
numbers) do not express; tests/test_foreach.py compares every one of them with PyTorch, each
argument form, in place and not, and a model EMA written with them, eagerly and captured."""

import ember

OPS = []

NO_TORCH = {
    f"T:{name}": "a list-of-tensors function: compared with PyTorch's in tests/test_foreach.py"
    for name in dir(ember)
    if name.startswith("_foreach")
}
