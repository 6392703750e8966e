"""ember.distributed.cost_model's formulae against values computed by hand (no MPI needed)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ember.distributed import cost_model as cm

NET = cm.Network("test", bandwidth=1e9, latency=1e-5)


def test_allreduce_algorithms_by_hand():
    n = 1e6
    # ring, 4 ranks: 2*3 latencies + 2*3/4 of the bytes at 1 GB/s
    assert cm.allreduce_time(n, 4, NET, "ring") == pytest.approx(6e-5 + 1.5e-3, rel=1e-12)
    # recursive doubling: log2(4) = 2 exchanges of the whole message
    assert cm.allreduce_time(n, 4, NET, "recursive_doubling") == pytest.approx(2 * 1.01e-3)
    assert cm.allreduce_time(n, 4, NET, "tree") == pytest.approx(4 * 1.01e-3)
    assert cm.allreduce_time(n, 4, NET) == pytest.approx(1.56e-3)  # auto: the ring
    # 8 bytes on 1024 ranks: the ring's 2*1023 latencies lose to 10 exchanges
    assert cm.allreduce_time(8, 1024, NET, "ring") == pytest.approx(
        2046e-5 + 2 * 1023 / 1024 * 8e-9
    )
    assert cm.allreduce_time(8, 1024, NET) == pytest.approx(10 * (1e-5 + 8e-9))
    # 3 ranks: ceil(log2 3) = 2 exchanges
    assert cm.allreduce_time(n, 3, NET, "recursive_doubling") == pytest.approx(2 * 1.01e-3)
    # the reduction's own cost: (N-1)/N of the bytes added once, on the ring
    slow = cm.Network("slow adds", 1e9, 1e-5, gamma=1e-10)
    assert cm.allreduce_time(n, 2, slow, "ring") == pytest.approx(2e-5 + 1e-3 + 5e-5)
    assert cm.allreduce_time(n, 1, NET) == 0.0
    with pytest.raises(ValueError, match="algorithm"):
        cm.allreduce_time(n, 2, NET, "butterfly")


def test_data_parallel_step_by_hand():
    grads = 100 * 2**20  # four 25 MiB buckets
    bucket = 2 * 15 * 1e-5 + 2 * 15 / 16 * 25 * 2**20 / 1e9  # ring on 16 ranks
    p = cm.data_parallel_step(0.3, grads, 16, NET)
    assert p.allreduce_s == pytest.approx(4 * bucket)
    # 0.2 s of backward hides all but the last bucket, which starts when backward ends
    assert p.exposed_s == pytest.approx(bucket)
    assert p.efficiency == pytest.approx(0.3 / (0.3 + bucket))
    assert p.speedup == pytest.approx(16 * 0.3 / (0.3 + bucket))
    none = cm.data_parallel_step(0.3, grads, 16, NET, overlap=0.0)
    assert none.exposed_s == pytest.approx(4 * bucket)
    half = cm.data_parallel_step(0.3, grads, 16, NET, overlap=0.5)  # hides 0.1 s
    assert half.exposed_s == pytest.approx(4 * bucket - 0.1)
    # a remainder bucket: 30 MiB is 25 + 5 MiB; on 2 ranks recursive doubling (one exchange,
    # one latency) beats the ring (two)
    odd = cm.data_parallel_step(0.0, 30 * 2**20, 2, NET)
    assert odd.exposed_s == pytest.approx(2e-5 + 30 * 2**20 / 1e9)
    assert cm.data_parallel_step(0.3, grads, 1, NET).efficiency == 1.0


def test_pipeline_step_by_hand():
    seconds, bubble = cm.pipeline_step_time(0.01, 4, 2, 1e6, NET)
    assert seconds == pytest.approx(5 * (0.01 + 2 * (1e-5 + 1e-3)))
    assert bubble == pytest.approx(1 / 5)
    assert cm.pipeline_step_time(0.01, 8, 1, 1e6, NET) == (pytest.approx(0.08), 0.0)


def test_fits_recover_the_parameters():
    sizes = np.array([8, 512, 2**15, 2**20, 2**24], dtype=np.float64)
    latency, bandwidth = cm.fit_latency_bandwidth(sizes, 2e-6 + sizes / 5e9)
    assert latency == pytest.approx(2e-6, rel=1e-9) and bandwidth == pytest.approx(5e9, rel=1e-9)
    times = [cm.allreduce_time(n, 4, NET, "ring") for n in sizes]
    alpha, beta = cm.fit_allreduce(sizes, times, 4)
    assert alpha == pytest.approx(1e-5, rel=1e-9) and beta == pytest.approx(1e9, rel=1e-9)


def test_scaling_table_lists_every_rank_count():
    table = cm.scaling_table(0.1, 1e8, [cm.NETWORKS["ethernet-25g"]], ranks=(8, 1024))
    rows = table.splitlines()
    assert len(rows) == 3 and rows[1].split()[0] == "8" and rows[2].split()[0] == "1024"
    eff = cm.data_parallel_step(0.1, 1e8, 1024, cm.NETWORKS["ethernet-25g"]).efficiency
    assert f"{eff:.1%}" in rows[2] and 0 < eff < 1 and not math.isnan(eff)
