"""`PipelineStage`: one stage of a partition as a forward program and a backward program.

A stage's *joint* graph is recorded once (graph/builder.py): its nodes of the captured forward
graph replayed on its inputs (the batch arguments on stage 0, the values received from earlier
stages, its parameters and buffers), on the last stage the loss function applied to the model's
output and the target, then graph autodiff (graph/autodiff.py) of what it sends on (or of the
loss) given the cotangents it will receive, with respect to its floating-point received values
and its parameters. The AOT partition (transforms/partition.py) splits that joint graph where
the backward starts: the *forward* program computes what the stage sends and the activations the
backward reads (saved per microbatch until its backward runs), the *backward* program takes those
saved values with the cotangents and returns the gradients of the received values (sent back to
their producers) and of the parameters (accumulated over microbatches). Both run through an
executor (runtime/executors.py; generated code by default), so a stage computes exactly what
the whole graph computes on its part, in the same order of operations within a node.
"""

from __future__ import annotations

from ...graph.autodiff import backward_graph_values
from ...graph.builder import GraphBuilder
from ...graph.ir import Graph
from ...ops import _registry as _reg
from ...runtime.executors import get_executor
from ...transforms.partition import joint_output_order
from ...transforms.partition import partition as split_joint
from ...types import TensorType
from .partition import PartitionError, nbytes

__all__ = ["PipelineStage"]


def _floating(v) -> bool:
    return v.type.dtype.is_floating_point


class _Programs:
    """A stage's compiled forward and backward, and how joint inputs feed them."""

    def __init__(self, forward, backward, fwd_pos, bwd_pos, n_out, saved_bytes, joint):
        self.forward, self.backward = forward, backward
        self.fwd_pos, self.bwd_pos = fwd_pos, bwd_pos  # joint input positions each one reads
        self.n_out = n_out  # forward outputs before the saved values
        self.saved_bytes = saved_bytes
        self.joint = joint


class PipelineStage:
    """Stage ``stage_index`` of a `Pipe` (made by ``pipe.build_stage``), run by rank
    ``stage_index`` of the default process group. ``parameters()`` are the model's own
    Parameters this stage owns: give them to the optimizer; a schedule's ``step`` leaves their
    gradients in ``.grad`` (accumulated onto what is there, as backward does)."""

    def __init__(self, pipe, stage_index: int, executor: str = "codegen"):
        part = pipe.partition
        if not 0 <= stage_index < part.num_stages:
            raise PartitionError(
                f"build_stage: stage_index {stage_index} out of range for {part.num_stages} stages"
            )
        self.pipe = pipe
        self.stage_index = stage_index
        self.num_stages = part.num_stages
        self.is_first = stage_index == 0
        self.is_last = stage_index == part.num_stages - 1
        self.executor = executor
        st = part.stages[stage_index]
        cap = part.captured
        self._stage = st
        self._state = [cap.tensors[i] for i in st.params]
        self._state_names = [cap.names[i] for i in st.params]
        self._recv = list(st.inputs)  # values received, with their producer stage
        self._send = [v for v in part.crossing if part.producer[id(v)] == stage_index]
        self._programs: dict = {}

    # ------------------------------------------------------------------ what the stage owns
    def named_parameters(self):
        return [(n, t) for n, t in zip(self._state_names, self._state) if t.requires_grad]

    def parameters(self):
        return [t for _, t in self.named_parameters()]

    def recv_specs(self) -> list:
        """(message id, source stage, type) of each value received per microbatch."""
        part = self.pipe.partition
        return [(part.message_id[id(v)], part.producer[id(v)], v.type) for v in self._recv]

    def send_specs(self) -> list:
        """(message id, destination stages, type) of each value sent per microbatch."""
        part = self.pipe.partition
        return [(part.message_id[id(v)], part.consumers[id(v)], v.type) for v in self._send]

    def state_arrays(self) -> list:
        return [t.numpy(force=True) for t in self._state]

    # ------------------------------------------------------------------ the programs
    def programs(self, loss_fn=None, target_types: tuple = ()) -> _Programs:
        key = (id(loss_fn), target_types)
        found = self._programs.get(key)
        if found is None:
            found = self._programs[key] = self._build(loss_fn, target_types)
        return found

    def _build(self, loss_fn, target_types) -> _Programs:
        part = self.pipe.partition
        cap = part.captured
        graph = cap.graph
        calls = list(graph.call_nodes())
        joint = Graph(f"{graph.name}_stage{self.stage_index}")
        b = GraphBuilder(joint)
        env: dict = {}
        if self.is_first:
            for v in graph.inputs[: cap.n_args]:
                env[id(v)] = b.input(v.type, v.name)
        recv_in = []
        for v in self._recv:
            env[id(v)] = t = b.input(v.type, f"recv_{v.name}")
            recv_in.append(t)
        state_in = []
        for i, name in zip(self._stage.params, self._state_names):
            v = graph.inputs[cap.n_args + i]
            env[id(v)] = t = b.input(v.type, name)
            state_in.append(t)
        targets = []  # the loss's targets, read on the last stage only
        if self.is_last:
            targets = [b.input(t, f"target{i}") for i, t in enumerate(target_types)]
        sends = [v for v in self._send if _floating(v)]
        cot_in = [b.input(v.type, f"grad_{v.name}") for v in sends]
        out_type = graph.outputs[0].type if self.is_last else None
        loss_cot = b.input(TensorType((), out_type.dtype), "grad_loss") if self.is_last else None
        with b:
            for p in self._stage.nodes:
                node = calls[p]
                for v in node.inputs:
                    if id(v) not in env and v.node.kind == "constant":
                        env[id(v)] = _reg.constant(graph.constants[v.node.name])
                result = _reg.apply(node.op, *[env[id(v)] for v in node.inputs], **node.attrs)
                results = (result,) if node.op.num_outputs == 1 else tuple(result)
                for v, r in zip(node.outputs, results):
                    env[id(v)] = r
            if self.is_last:
                outputs = [env[id(v)] for v in graph.outputs]
                if loss_fn is None:
                    raise PartitionError("the last pipeline stage needs the schedule's loss_fn")
                loss = loss_fn(*outputs, *[t for t in targets])
                if tuple(loss.shape) != ():
                    raise PartitionError(
                        f"pipeline loss_fn must return a scalar, got shape {tuple(loss.shape)}"
                    )
                fwd_out = [loss, *outputs]
                differentiate, cotangents = [loss], [loss_cot.to(loss.dtype)]
            else:
                fwd_out = [env[id(v)] for v in self._send]
                differentiate, cotangents = [env[id(v)] for v in sends], cot_in
            start = len(joint.nodes)
            wrt = [t for t, v in zip(recv_in, self._recv) if _floating(v)]
            wrt += [t for t, s in zip(state_in, self._state) if s.requires_grad]
            grads = backward_graph_values(b, differentiate, wrt, cotangents) if wrt else []
            backward_ids = {id(n) for n in joint.nodes[start:]}
            # every gradient made by a backward node, so the partition returns it from there
            grads = [g if id(b.value_of(g).node) in backward_ids else g.clone() for g in grads]
        joint.set_outputs([b.value_of(t) for t in [*fwd_out, *grads]])
        order = joint_output_order(joint, start)
        n_out = len(fwd_out)
        expected = [("forward", i) for i in range(n_out)]
        expected += [("backward", i) for i in range(len(grads))]
        assert order == expected, "a stage's forward outputs come from forward nodes"
        forward, backward = split_joint(joint, start)
        fwd_pos = _positions(joint, joint.nodes[:start], joint.outputs[:n_out])
        bwd_pos = _positions(joint, joint.nodes[start:], ())
        saved = forward.outputs[n_out:]
        run = get_executor(self.executor)
        return _Programs(
            run.prepare(forward),
            run.prepare(backward),
            fwd_pos,
            bwd_pos,
            n_out,
            sum(nbytes(v.type) for v in saved),
            joint,
        )


def _positions(joint: Graph, nodes, returned) -> list[int]:
    """Positions of the joint inputs a part of the partition takes, in input order (as
    transforms/partition.py adds them: those its nodes read, and those it returns as they are)."""
    used = {id(v) for n in nodes if n.kind != "input" for v in n.inputs}
    used.update(id(v) for v in returned)
    return [i for i, v in enumerate(joint.inputs) if id(v) in used]
