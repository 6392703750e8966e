"""Functions tests/test_multiprocessing.py spawns: in their own module, so a spawned process
imports only this (and ember, to unpickle a tensor), not the test module and PyTorch."""


def square(index, queue, base):
    queue.put((index, base * (index + 1)))


def fail(index):
    if index == 1:
        raise ValueError("bad shard")
