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
        auto._bind()  # (a new step rule)
        auto._on = True
        events()

    def wait(self, it, ms=1.0):
        t0 = n._now()
        time.sleep(ms / 1000)
        auto._on_wait(it, t0, n._now())

    def train(self, it, opt, compute_s=0.0):
        self.wait(it)
        auto._on_backward()
        time.sleep(compute_s)
        auto._on_optimizer_step(opt)

    def test_each_optimizer_step_ends_a_step_that_holds_its_batch_wait(self):
        train, opt = _SingleProcessDataLoaderIter(Dataset()), Optimizer()
        for _ in range(4):
            self.train(train, opt, compute_s=0.002)
        auto._finish()  # (the first step closes at the second batch, the last at once: none waits here)
        evs = events()
        st, ws = steps(evs), waits(evs)
        self.assertEqual([s[0] for s in st], [0, 1, 2, 3])
        self.assertEqual(len(ws), 4)
        self.assertEqual(ws[0][0], "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__")
        self.assertEqual({e["name"] for e in evs if e["kind"] == "step"}, {"optimizer step"})
        for (_, b, e), (_, wb, we) in zip(st, ws):
            self.assertLessEqual(b, wb)  # the wait inside its step
            self.assertLessEqual(we, e)
        for a, b in zip(st, st[1:]):
            self.assertLessEqual(abs(a[2] - b[1]), 2)  # contiguous: one ends where the next begins (ns rounding)

    def test_the_hooks_measure_their_own_time_and_the_steps(self):
        # Each hook body adds its time and one call to the process's totals
        # (what the sender sends with liveprof's own cost); each step the
        # rule closes counts. With tracing off the hooks still run, and count.
        train, opt = _SingleProcessDataLoaderIter(Dataset()), Optimizer()
        before = n._hook_totals()
        for _ in range(5):
            self.train(train, opt)  # a wait, a backward, an optimizer step: three hooks
        auto._finish()
        after = n._hook_totals()
        self.assertEqual(after["hook_calls"] - before["hook_calls"], 15)
        self.assertEqual(after["steps"] - before["steps"], 5)
        self.assertEqual(len(steps(events())), 5)
        # Their time: more than nothing, less than the 5 ms of batches they wait around.
        spent = after["hook_ns"] - before["hook_ns"]
        self.assertGreater(spent, 0)
        self.assertLess(spent, 5_000_000)
        n.set_enabled(False)
        for _ in range(3):
            self.train(train, opt)
        auto._finish()
        off = n._hook_totals()
        self.assertEqual(off["hook_calls"] - after["hook_calls"], 9)
        self.assertEqual(off["steps"] - after["steps"], 3)
        self.assertEqual(steps(events()), [])
        # _hook_end returns the clock it read (a hook uses it as its own reading).
        t = n._now()
        self.assertGreaterEqual(n._hook_end(t), t)

    def test_an_evaluation_loader_between_epochs_is_outside_steps(self):
        train, val, opt = _SingleProcessDataLoaderIter(Dataset()), _SingleProcessDataLoaderIter(Dataset()), Optimizer()
        for _ in range(3):
            self.train(train, opt)
        t_eval = n._now()
        for _ in range(5):
            self.wait(val, ms=3)  # eval: no optimizer step
        t_eval_end = n._now()
        for _ in range(2):
            self.train(train, opt)
        evs = events()
        st = steps(evs)
        self.assertEqual([s[0] for s in st], [0, 1, 2, 3, 4])
        for num, b, e in st:  # no step spans the evaluation
            self.assertFalse(b < t_eval_end and e > t_eval and e - b > 10_000_000, (num, b, e))
        self.assertEqual(len(waits(evs)), 10)

    def test_a_new_loader_each_epoch_is_still_training(self):
        opt = Optimizer()
        for _ in range(3):  # each epoch a new loader over a new dataset
            train = _SingleProcessDataLoaderIter(Dataset())
            for _ in range(4):
                self.train(train, opt)
        self.assertEqual([s[0] for s in steps(events())], list(range(12)))

    def test_two_optimizers_one_step_per_iteration(self):
        train, g, d = _SingleProcessDataLoaderIter(Dataset()), Optimizer(), Optimizer()
        for _ in range(3):
            self.wait(train)
            auto._on_backward()
            auto._on_optimizer_step(d)  # (a GAN's discriminator, then its generator)
            auto._on_backward()
            auto._on_optimizer_step(g)
        auto._finish()
        self.assertEqual([s[0] for s in steps(events())], [0, 1, 2])

    def test_profiler_steps_mark_steps_when_no_optimizer_steps(self):
        train = _SingleProcessDataLoaderIter(Dataset())
        for _ in range(3):
            self.wait(train)
            auto._on_profiler_step()
        evs = events()
        self.assertEqual([s[0] for s in steps(evs)], [0, 1, 2])
        self.assertEqual({e["name"] for e in evs if e["kind"] == "step"}, {"torch.profiler step"})

    def test_a_program_that_annotates_itself_is_left_alone(self):
        train, opt = _SingleProcessDataLoaderIter(Dataset()), Optimizer()
        auto.program_annotates()
        self.wait(train)
        auto._on_optimizer_step(opt)
        auto._on_profiler_step()
        auto._finish()
        self.assertEqual(steps(events()), [])


if __name__ == "__main__":
    sys.exit(0 if unittest.main(exit=False, verbosity=2).result.wasSuccessful() else 1)
