"""torch.profiler's steering of a profile (profiler/schedule.py): schedules over prof.step(),
on_trace_ready and the TensorBoard trace handler, activities, and torch.autograd.profiler."""

import ember


def test_a_schedule_records_the_active_steps_and_hands_each_cycle_over():
    """PyTorch's schedule semantics (skip_first, wait, warmup, active, repeat): the steps
    recorded, one on_trace_ready call per cycle with that cycle's events only."""
    import torch

    want = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=2, skip_first=1)
    got = ember.profiler.schedule(wait=1, warmup=1, active=2, repeat=2, skip_first=1)
    assert [got(i).name for i in range(12)] == [want(i).name for i in range(12)]

    cycles = []

    def ready(prof):
        cycles.append(sorted(e.name for e in prof.events() if e.name.startswith("step")))

    x = ember.ones(3)
    with ember.profiler.profile(
        activities=[ember.profiler.ProfilerActivity.CPU, ember.profiler.ProfilerActivity.CUDA],
        schedule=got,
        on_trace_ready=ready,
    ) as prof:
        for i in range(12):
            with ember.profiler.record_function(f"step{i}"):
                x = x * 1.0
            prof.step()
    # steps 0 skipped; cycles of 4 from step 1: wait 1, warmup 2, record 3-4; then 5-8
    assert cycles == [["step3", "step4"], ["step7", "step8"]]


def test_without_a_schedule_on_trace_ready_gets_the_whole_block(tmp_path):
    handler = ember.profiler.tensorboard_trace_handler(str(tmp_path / "tb"), worker_name="w")
    with ember.profiler.profile(on_trace_ready=handler, with_stack=True, with_flops=True):
        (ember.ones(4) * 2).sum()
    (trace,) = (tmp_path / "tb").iterdir()
    assert trace.name.startswith("w.") and trace.name.endswith(".pt.trace.json")
    assert '"traceEvents"' in trace.read_text()
    assert ember.profiler.ProfilerActivity.CPU in ember.profiler.supported_activities()


def test_the_older_autograd_profiler_records_too():
    with ember.autograd.profiler.profile(record_shapes=True, use_cuda=False) as prof:
        with ember.autograd.profiler.record_function("block"):
            (ember.ones(3, 3) @ ember.ones(3, 3)).sum()
    text = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=5)
    assert "matmul" in text
    import ember.autograd.profiler as legacy  # (importable as PyTorch's module)

    assert legacy.profile is ember.autograd.profiler.profile
