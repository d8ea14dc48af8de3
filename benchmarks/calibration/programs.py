"""Calibration programs (issue 7): host programs taking a device, run on ``opencl`` and ``sim:opencl``.

Every program runs on a device with two queues (``opencl?queues=2``). ``TRAINING`` is what the cost
model is fitted on; ``HELD_OUT`` are different mixes, sizes and shapes it is judged on. Ops signal one
or two semaphores (so the issue path's per-signal cost can be told from its fixed cost), fills and
copies come in several sizes, ``spin`` in several workgroup counts and iteration counts, ``axpy``
with workgroups proportional to its length. Every wait is bounded.
"""

from __future__ import annotations

from reference import hal

WAIT_S = 30.0
Q0, Q1 = 1 << 0, 1 << 1
MAX_BYTES = 1 << 22


class Ctx:
    """Buffers, the executable and a timeline semaphore per queue."""

    def __init__(self, dev):
        self.dev = dev
        self.exe = dev.load_executable()
        self.a = dev.allocator.allocate_buffer(MAX_BYTES)
        self.b = dev.allocator.allocate_buffer(MAX_BYTES)
        self.c = dev.allocator.allocate_buffer(MAX_BYTES)
        self.scratch = dev.allocator.allocate_buffer(4096)
        # A second semaphore some ops also signal: one per queue, so that its values rise in each
        # queue's order. (One shared by both queues raced: the value order then depended on which
        # queue's op completed first, and the model, ordering them otherwise than PoCL, refused a
        # signal and failed the rest of the program; `halsim check` reports it as
        # semaphore.racing_signals.)
        self.side = {Q0: dev.create_semaphore(), Q1: dev.create_semaphore()}
        self.side_v = {Q0: 0, Q1: 0}

    def signals(self, sem, value, extra: bool, q=Q0):
        if not extra:
            return [(sem, value)]
        self.side_v[q] += 1
        return [(sem, value), (self.side[q], self.side_v[q])]

    # one op each: wait list, signal list, queue
    def fill(self, wait, signal, n, q=Q0):
        self.dev.queue_fill(wait, signal, self.a, 0, n, 7, 4, queue_affinity=q)

    def copy(self, wait, signal, n, q=Q0):
        self.dev.queue_copy(wait, signal, self.a, 0, self.b, 0, n, queue_affinity=q)

    def update(self, wait, signal, n, q=Q0):
        self.dev.queue_update(wait, signal, bytes(n), 0, self.c, 0, n, queue_affinity=q)

    def axpy(self, wait, signal, n, q=Q0):
        self.dev.queue_dispatch(wait, signal, self.exe, "axpy", (max(1, n // 1024), 1, 1), (2,),
                                (hal.BufferRef(self.a, 0, n), hal.BufferRef(self.b, 0, n)), queue_affinity=q)

    def spin(self, wait, signal, iterations, workgroups=1, q=Q0):
        self.dev.queue_dispatch(wait, signal, self.exe, "spin", (workgroups, 1, 1), (iterations,),
                                (hal.BufferRef(self.scratch, 0, 4096),), queue_affinity=q)


def _chain(ctx: Ctx, steps, q=Q0, extra_every=2):
    """Each step waits on the previous one (a semaphore chain on one queue); submitted up front."""
    sem = ctx.dev.create_semaphore()
    for k, (kind, arg) in enumerate(steps):
        wait = [(sem, k)] if k else []
        sig = ctx.signals(sem, k + 1, extra_every and k % extra_every == 1, q)
        if kind == "spin":
            iters, wg = arg
            ctx.spin(wait, sig, iters, wg, q=q)
        else:
            getattr(ctx, kind)(wait, sig, arg, q=q)
    sem.wait(len(steps), timeout=WAIT_S)


def _fan(ctx: Ctx, width: int, steps_per_branch, join_kind="copy", join_n=65536, gated=False):
    """A head op, then ``width`` branches alternating over both queues, then a join waiting on all.
    ``gated``: the head waits for a host signal given once everything is submitted, so both queues'
    branches are ready at once (they contend for the device)."""
    dev = ctx.dev
    head, done, gate = dev.create_semaphore(), dev.create_semaphore(), dev.create_semaphore()
    ctx.fill([(gate, 1)] if gated else [], [(head, 1)], 4096)
    branch_sems = []
    for b in range(width):
        s = dev.create_semaphore()
        q = Q0 if b % 2 == 0 else Q1
        for k, (kind, arg) in enumerate(steps_per_branch):
            wait = [(head, 1)] if k == 0 else [(s, k)]
            sig = ctx.signals(s, k + 1, k == 0, q)
            if kind == "spin":
                ctx.spin(wait, sig, arg[0], arg[1], q=q)
            else:
                getattr(ctx, kind)(wait, sig, arg, q=q)
        branch_sems.append((s, len(steps_per_branch)))
    getattr(ctx, join_kind)(branch_sems, [(done, 1)], join_n, q=Q0)
    if gated:
        gate.signal(1)
    done.wait(1, timeout=WAIT_S)


def _round_trips(ctx: Ctx, steps):
    """Submit one op, wait for it on the host, submit the next (host round trips)."""
    sem = ctx.dev.create_semaphore()
    for k, (kind, arg) in enumerate(steps):
        sig = ctx.signals(sem, k + 1, k % 2 == 1)
        if kind == "spin":
            ctx.spin([], sig, arg[0], arg[1])
        else:
            getattr(ctx, kind)([], sig, arg)
        sem.wait(k + 1, timeout=WAIT_S)


def _gated(ctx: Ctx, steps):
    """Submit a chain behind a host-signaled gate (user events), then open it."""
    dev = ctx.dev
    gate, sem = dev.create_semaphore(), dev.create_semaphore()
    for k, (kind, arg) in enumerate(steps):
        wait = [(gate, 1)] if k == 0 else [(sem, k)]
        sig = ctx.signals(sem, k + 1, k % 2 == 1)
        if kind == "spin":
            ctx.spin(wait, sig, arg[0], arg[1])
        else:
            getattr(ctx, kind)(wait, sig, arg)
    gate.signal(1)
    sem.wait(len(steps), timeout=WAIT_S)


SIZES = (4096, 65536, 262144, 1 << 20, 1 << 22)


# -- training ---------------------------------------------------------------------------------------

def train_transfers(dev):
    ctx = Ctx(dev)
    steps = []
    for n in SIZES:
        steps += [("fill", n), ("copy", n), ("update", min(n, 1 << 16))]
    steps += [("update", 1024), ("update", 16384)]
    _chain(ctx, steps)


def train_kernels(dev):
    ctx = Ctx(dev)
    steps = [("axpy", n) for n in SIZES]
    # PoCL runs spin's work items one after another (≈ 2.9 ns × iterations × workgroups), a product the
    # cost model cannot express: long spins use one workgroup, a few short ones vary the count.
    steps += [("spin", (it, wg)) for it, wg in ((1000, 1), (20000, 1), (100000, 1), (50000, 1), (200000, 1),
                                                (2000, 4), (1000, 8))]
    _chain(ctx, steps)


def train_fan(dev):
    ctx = Ctx(dev)
    _fan(ctx, 4, [("axpy", 262144), ("fill", 65536), ("spin", (20000, 1))], gated=True)


def train_round_trips(dev):
    ctx = Ctx(dev)
    _round_trips(ctx, [("fill", 65536), ("copy", 262144), ("axpy", 65536), ("spin", (50000, 1)), ("update", 4096),
                       ("copy", 4096), ("fill", 1 << 20), ("axpy", 1 << 20)])


def train_gated(dev):
    ctx = Ctx(dev)
    _gated(ctx, [("copy", 1 << 20), ("spin", (10000, 1)), ("fill", 262144), ("axpy", 262144), ("update", 8192),
                 ("copy", 65536)])


# -- held out ---------------------------------------------------------------------------------------

def held_pipeline(dev):
    """A longer single-queue pipeline: mixed kinds and sizes not in training."""
    ctx = Ctx(dev)
    steps = []
    for n in (131072, 524288, 2 << 20):
        steps += [("update", 32768), ("copy", n), ("axpy", n), ("spin", (30000, 1)), ("fill", n // 2)]
    _chain(ctx, steps, extra_every=3)


def held_fan(dev):
    """A wider fan-out/fan-in over both queues."""
    ctx = Ctx(dev)
    _fan(ctx, 6, [("copy", 131072), ("spin", (40000, 1)), ("axpy", 524288)], join_kind="fill", join_n=1 << 20)


def held_round_trips(dev):
    """Host round trips with other sizes."""
    ctx = Ctx(dev)
    _round_trips(ctx, [("copy", 1 << 21), ("spin", (150000, 1)), ("fill", 131072), ("axpy", 131072),
                       ("update", 32768), ("fill", 4096)])


def held_mixed(dev):
    """A gated chain on queue 0 alongside a spin-heavy chain on queue 1."""
    ctx = Ctx(dev)
    gate, a, b = dev.create_semaphore(), dev.create_semaphore(), dev.create_semaphore()
    steps_a = [("fill", 524288), ("copy", 524288), ("axpy", 524288), ("copy", 131072)]
    steps_b = [("spin", (80000, 1)), ("spin", (5000, 1)), ("spin", (120000, 1))]
    for k, (kind, arg) in enumerate(steps_a):
        getattr(ctx, kind)([(gate, 1)] if k == 0 else [(a, k)], [(a, k + 1)], arg, q=Q0)
    for k, (_kind, (it, wg)) in enumerate(steps_b):
        ctx.spin([(b, k)] if k else [], [(b, k + 1)], it, wg, q=Q1)
    gate.signal(1)
    dev.wait_semaphores(hal.WaitMode.ALL, [(a, len(steps_a)), (b, len(steps_b))], timeout=WAIT_S)


TRAINING = {"train_transfers": train_transfers, "train_kernels": train_kernels, "train_fan": train_fan,
            "train_round_trips": train_round_trips, "train_gated": train_gated}
HELD_OUT = {"held_pipeline": held_pipeline, "held_fan": held_fan, "held_round_trips": held_round_trips,
            "held_mixed": held_mixed}
