"""The step rule of `liveprof run`'s PyTorch hooks (liveprof/_steps.py),
driven with the calls each loop shape makes, in its order, at made-up
times: the steps it records, their numbers and their bounds. No torch, no
library (the rule is pure).
"""

import importlib.util
import os
import sys
import unittest

# The module alone, by its path: the package's __init__ loads the library.
_spec = importlib.util.spec_from_file_location(
    "liveprof_steps", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "python",
                                   "liveprof", "_steps.py"))
_steps = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_steps)
SOURCE_OPTIMIZER, SOURCE_PROFILER, StepRule = _steps.SOURCE_OPTIMIZER, _steps.SOURCE_PROFILER, _steps.StepRule

A, B = "A", "B"  # two optimizers


class Loop:
    """A StepRule and a clock that moves 10 ticks per call."""

    def __init__(self):
        self.steps = []
        self.rule = StepRule(lambda n, t0, t1: self.steps.append((n, t0, t1)))
        self.t = 1000

    def tick(self):
        self.t += 10
        return self.t

    def wait(self):
        t = self.tick()
        self.rule.wait(t)
        return t

    def backward(self):
        self.rule.backward(self.tick())

    def zero_grad(self):
        self.rule.zero_grad(self.tick())

    def step(self, key=A):
        t = self.tick()
        self.rule.optimizer_step(key, t)
        return t

    def train(self, key=A):
        """wait, zero_grad, backward, step: one ordinary iteration."""
        w = self.wait()
        self.zero_grad()
        self.backward()
        return w, self.step(key)

    def numbers(self):
        return [s[0] for s in self.steps]

    def assert_contiguous(self, test):
        for a, b in zip(self.steps, self.steps[1:]):
            test.assertEqual(a[2], b[1], (a, b))


class StepRuleTest(unittest.TestCase):
    def test_one_loader_one_optimizer_every_step_from_the_first_batch_to_the_last_step(self):
        loop = Loop()
        first_wait, _ = loop.train()
        ends = [loop.train()[1] for _ in range(9)]
        loop.rule.finish()
        self.assertEqual(loop.numbers(), list(range(10)))
        self.assertEqual(loop.steps[0][1], first_wait)  # the first step begins at its batch's request
        self.assertEqual([s[2] for s in loop.steps[1:]], ends)  # each ends at its optimizer step
        loop.assert_contiguous(self)
        self.assertEqual(loop.rule.source, SOURCE_OPTIMIZER)

    def test_the_last_step_is_recorded_when_it_ends_not_at_exit_once_the_closer_is_known(self):
        loop = Loop()
        loop.train()
        loop.train()
        self.assertEqual(loop.numbers(), [0, 1])  # the first closed at the second batch, the second at once
        loop.train()
        self.assertEqual(loop.numbers(), [0, 1, 2])

    def test_a_single_iteration_job_is_closed_at_finish(self):
        loop = Loop()
        _, end = loop.train()
        self.assertEqual(loop.steps, [])
        loop.rule.finish()
        self.assertEqual(len(loop.steps), 1)
        self.assertEqual(loop.steps[0][2], end)

    def test_a_new_loader_each_epoch_changes_nothing(self):
        loop = Loop()
        for _ in range(3):  # three epochs; the rule never sees which loader a batch came from
            for _ in range(20):
                loop.train()
        loop.rule.finish()
        self.assertEqual(loop.numbers(), list(range(60)))

    def test_an_evaluation_loop_between_epochs_stays_outside_steps(self):
        loop = Loop()
        for _ in range(3):
            loop.train()
        eval_begin = loop.t
        for _ in range(5):  # evaluation: batches and forwards, no backward, no step
            loop.wait()
            loop.tick()
        eval_end = loop.t
        train_wait, _ = loop.train()
        loop.train()
        loop.rule.finish()
        self.assertEqual(loop.numbers(), [0, 1, 2, 3, 4])
        for n, b, e in loop.steps:
            self.assertFalse(b < eval_end and e > eval_begin, (n, b, e))  # none overlaps the evaluation
        self.assertEqual(loop.steps[3][1], train_wait)  # the next step begins at its own batch's request

    def test_validation_every_n_steps_mid_epoch(self):
        loop = Loop()
        for i in range(12):
            loop.train()
            if i % 4 == 3:
                for _ in range(3):
                    loop.wait()
        loop.rule.finish()
        self.assertEqual(loop.numbers(), list(range(12)))

    def test_a_one_batch_evaluation_is_left_out_too(self):
        loop = Loop()
        loop.train()
        loop.train()
        loop.wait()  # one evaluation batch
        w, _ = loop.train()
        loop.rule.finish()
        self.assertEqual(loop.numbers(), [0, 1, 2])
        self.assertEqual(loop.steps[2][1], w)

    def test_no_loader_zero_grad_first(self):
        loop = Loop()
        zero = loop.tick()
        loop.rule.zero_grad(zero)
        loop.backward()
        loop.step()
        for _ in range(49):
            loop.zero_grad()
            loop.backward()
            loop.step()
        loop.rule.finish()
        self.assertEqual(loop.numbers(), list(range(50)))
        self.assertEqual(loop.steps[0][1], zero)
        loop.assert_contiguous(self)

    def test_no_loader_zero_grad_after_the_step_begins_the_first_step_at_its_backward(self):
        loop = Loop()
        first_backward = loop.tick()
        loop.rule.backward(first_backward)
        loop.step()
        loop.zero_grad()
        for _ in range(4):
            loop.backward()
            loop.step()
            loop.zero_grad()
        loop.rule.finish()
        self.assertEqual(loop.numbers(), list(range(5)))
        self.assertEqual(loop.steps[0][1], first_backward)

    def test_gradient_accumulation_one_step_per_optimizer_step(self):
        loop = Loop()
        for _ in range(6):
            for _ in range(4):  # four micro-batches
                loop.wait()
                loop.backward()
            loop.step()
            loop.zero_grad()
        loop.rule.finish()
        self.assertEqual(loop.numbers(), list(range(6)))

    def test_a_gan_two_optimizers_one_step_per_iteration(self):
        loop = Loop()
        ends = []
        for _ in range(5):
            loop.wait()
            loop.backward()
            loop.step(B)  # discriminator
            loop.backward()
            ends.append(loop.step(A))  # generator: the iteration's last
        loop.rule.finish()
        self.assertEqual(loop.numbers(), list(range(5)))
        self.assertEqual([s[2] for s in loop.steps], ends)

    def test_a_gan_without_a_loader(self):
        loop = Loop()
        for _ in range(5):
            loop.backward()
            loop.step(B)
            loop.backward()
            loop.step(A)
        loop.rule.finish()
        self.assertEqual(loop.numbers(), list(range(5)))

    def test_two_models_trained_alternately_each_step_counts(self):
        loop = Loop()
        for i in range(10):
            loop.train(A if i % 2 == 0 else B)
        loop.rule.finish()
        self.assertEqual(loop.numbers(), list(range(10)))

    def test_a_step_with_a_closure_lbfgs(self):
        loop = Loop()
        for _ in range(4):
            loop.wait()
            for _ in range(3):  # the closure's evaluations inside step()
                loop.zero_grad()
                loop.backward()
            loop.step()
        loop.rule.finish()
        self.assertEqual(loop.numbers(), list(range(4)))

    def test_a_skipped_amp_step_counts_as_the_program_counts_it(self):
        # GradScaler.step(opt) skipping opt.step() reports the optimizer step
        # all the same (_autoattach._patch_grad_scaler): the same call here.
        loop = Loop()
        for _ in range(8):
            loop.train()
        loop.rule.finish()
        self.assertEqual(loop.numbers(), list(range(8)))

    def test_an_early_break_and_a_new_epoch(self):
        loop = Loop()
        for _ in range(3):
            for _ in range(5):
                loop.train()
            loop.wait()  # the batch fetched before the break, never trained on
        for _ in range(2):
            loop.train()
        loop.rule.finish()
        self.assertEqual(loop.numbers(), list(range(17)))

    def test_inference_with_torch_profiler_steps_from_the_profiler(self):
        loop = Loop()
        for _ in range(6):
            loop.wait()
            loop.rule.profiler_step(loop.tick())
        loop.rule.finish()
        self.assertEqual(loop.rule.source, SOURCE_PROFILER)
        self.assertEqual(loop.numbers(), list(range(6)))  # each profile.step() ends one, the first begun at its batch

    def test_torch_profiler_around_training_keeps_the_optimizer_count(self):
        loop = Loop()
        for i in range(10):
            loop.train()
            if 3 <= i < 8:  # the program's own profiler window, step() at each iteration's end
                loop.rule.profiler_step(loop.tick())
        loop.rule.finish()
        self.assertEqual(loop.rule.source, SOURCE_OPTIMIZER)
        self.assertEqual(loop.numbers(), list(range(10)))

    def test_profile_step_at_the_top_of_the_loop(self):
        loop = Loop()
        for _ in range(7):
            loop.rule.profiler_step(loop.tick())
            loop.train()
        loop.rule.finish()
        self.assertEqual(loop.numbers(), list(range(7)))

    def test_inference_only_no_steps(self):
        loop = Loop()
        for _ in range(10):
            loop.wait()
        loop.rule.finish()
        self.assertEqual(loop.steps, [])


if __name__ == "__main__":
    sys.exit(0 if unittest.main(exit=False, verbosity=1).result.wasSuccessful() else 1)
