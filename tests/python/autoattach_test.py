"""liveprof run's PyTorch hooks (liveprof/_autoattach.py), their step and
input logic driven directly: stand-in loader iterators and optimizers (the
patched torch entry points call exactly these functions), the events read
back from the process's own rings. No torch, no server.
"""

import os
import sys
import time
import unittest

from liveprof import _autoattach as auto
from liveprof import _native as n


class Dataset:
    pass


class _SingleProcessDataLoaderIter:
    def __init__(self, dataset):
        self._dataset = dataset


class Optimizer:
    pass


def events():
    return n._drain_local()


def steps(evs):
    return [(e["step"], e["ts"], e["ts"] + e["dur_ns"]) for e in evs if e["kind"] == "step"]


def waits(evs):
    return [(e["name"], e["ts"], e["ts"] + e["dur_ns"]) for e in evs if e["kind"] == "input"]


class AutoattachTest(unittest.TestCase):
    def setUp(self):
        n.set_enabled(True)
        n.set_level(2)
        auto._bind()
        auto._on, auto._steps_from, auto._step_closer = True, None, None
        auto._step_n, auto._step_t0, auto._train_data, auto._last_data = 0, 0, None, None
        events()

    def wait(self, it, ms=1.0):
        t0 = n._now()
        time.sleep(ms / 1000)
        auto._on_wait(it, t0, n._now())

    def test_each_optimizer_step_ends_a_step_that_holds_its_batch_wait(self):
        train, opt = _SingleProcessDataLoaderIter(Dataset()), Optimizer()
        for _ in range(4):
            self.wait(train)
            time.sleep(0.002)  # compute
            auto._on_optimizer_step(opt)
        evs = events()
        st, ws = steps(evs), waits(evs)
        self.assertEqual([s[0] for s in st], [0, 1, 2, 3])
        self.assertEqual(len(ws), 4)
        self.assertEqual(ws[0][0], "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__")
        for (_, b, e), (_, wb, we) in zip(st, ws):
            self.assertLessEqual(b, wb)  # the wait inside its step
            self.assertLessEqual(we, e)
        for a, b in zip(st, st[1:]):
            self.assertLessEqual(abs(a[2] - b[1]), 2)  # contiguous: one ends where the next begins (ns rounding)

    def test_an_evaluation_loader_between_epochs_is_outside_steps(self):
        train, val, opt = _SingleProcessDataLoaderIter(Dataset()), _SingleProcessDataLoaderIter(Dataset()), Optimizer()
        for _ in range(3):
            self.wait(train)
            auto._on_optimizer_step(opt)
        t_eval = n._now()
        for _ in range(5):
            self.wait(val, ms=3)  # eval: no optimizer step
        t_eval_end = n._now()
        for _ in range(2):
            self.wait(train)
            auto._on_optimizer_step(opt)
        evs = events()
        st = steps(evs)
        self.assertEqual([s[0] for s in st], [0, 1, 2, 3, 4])
        for num, b, e in st:  # no step spans the evaluation
            self.assertFalse(b < t_eval_end and e > t_eval and e - b > 10_000_000, (num, b, e))
        self.assertEqual(len(waits(evs)), 10)

    def test_the_first_optimizer_marks_steps_and_a_new_one_takes_over_when_it_is_gone(self):
        train, g, d = _SingleProcessDataLoaderIter(Dataset()), Optimizer(), Optimizer()
        for _ in range(3):
            self.wait(train)
            auto._on_optimizer_step(g)
            auto._on_optimizer_step(d)  # (a GAN's second optimizer)
        self.assertEqual([s[0] for s in steps(events())], [0, 1, 2])
        del g  # a new run in the same process: its optimizer marks steps
        for _ in range(2):
            self.wait(train)
            auto._on_optimizer_step(d)
        self.assertEqual([s[0] for s in steps(events())], [3, 4])

    def test_profiler_steps_replace_optimizer_steps(self):
        train, opt = _SingleProcessDataLoaderIter(Dataset()), Optimizer()
        self.wait(train)
        auto._on_optimizer_step(opt)  # step 0 by the optimizer
        for _ in range(3):
            auto._on_profiler_step()
            self.wait(train)
            auto._on_optimizer_step(opt)  # ignored from now on
        auto._on_profiler_step()
        self.assertEqual([s[0] for s in steps(events())], [0, 1, 2, 3])

    def test_a_program_that_annotates_itself_is_left_alone(self):
        train, opt = _SingleProcessDataLoaderIter(Dataset()), Optimizer()
        auto.program_annotates()
        auto._on_optimizer_step(opt)
        auto._on_profiler_step()
        self.assertEqual(steps(events()), [])


if __name__ == "__main__":
    sys.exit(0 if unittest.main(exit=False, verbosity=2).result.wasSuccessful() else 1)
