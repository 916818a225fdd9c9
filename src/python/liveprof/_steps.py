"""Where a training step begins and ends, from what training does
(``liveprof run``'s PyTorch hooks, _autoattach.py; docs/attach.md, "Steps").

A step is one iteration of the training loop: it ends with the optimizer
step(s) of the iteration and begins where the previous one ended. What the
hooks report, in the order the program does it:

- ``wait(t0)``: the loop asked a DataLoader for a batch (t0: when it asked);
- ``backward(t)``: a backward pass ran (``loss.backward()``,
  ``torch.autograd.backward`` / ``grad``): the batch is trained on;
- ``zero_grad(t)``: an optimizer's ``zero_grad()``;
- ``optimizer_step(key, t)``: an optimizer stepped (``key`` tells
  optimizers apart; a ``GradScaler`` step that skipped its optimizer on
  inf/NaN counts, as the program counts it);
- ``profiler_step(t)``: ``torch.profiler.profile.step()``;
- ``finish()``: the program ends.

The rules:

- **An iteration ends at its last optimizer step.** Which optimizer steps
  last is learned from the first iteration: the iteration ends when the
  next batch is asked for, or when an optimizer that already stepped in it
  steps again (a loop without a DataLoader); the optimizer that stepped
  last then is the *closer*, and from then on its step ends an iteration
  at once. So a GAN's two optimizers, two models trained alternately,
  gradient accumulation (one step per optimizer step), LBFGS's
  ``step(closure)`` and a skipped AMP step all come out as the program
  counts them, and no loader or dataset has to be told apart.
- **Evaluation is outside steps.** A batch that no backward pass follows
  is not trained on: when the loop asks for another batch with no backward
  since the last one (an evaluation loop, under ``no_grad`` or not), the
  open step begins again at this request; so an evaluation loop's time,
  and the time before it since the last training step, stays out, and the
  next training step begins at its own batch's request.
- **The first step** begins at the first of: a batch request, a
  ``zero_grad()``, a backward pass (a loop without a DataLoader that zeroes
  its gradients after stepping begins its first step at its first
  backward: the first forward is not seen).
- **torch.profiler's steps** are the boundaries when no optimizer steps (an
  inference loop profiled with ``profile.step()``); with an optimizer, a
  ``profile.step()`` after the iteration's optimizer step ends the
  iteration there (at most the first iteration waits for it).
- **The last step** is closed at ``finish()`` if its end was still to be
  confirmed.

Pure: no torch, no clock, no I/O; ``record(n, begin, end)`` is called for
each step, numbered from 0. One thread (the training loop's).
"""

SOURCE_NONE = "none"
SOURCE_OPTIMIZER = "optimizer"
SOURCE_PROFILER = "torch.profiler"


class StepRule:
    def __init__(self, record):
        self._record = record
        self.source = SOURCE_NONE
        self.steps = 0          # steps recorded so far
        self._t0 = 0            # the open step's begin; 0: none open
        self._stepped = []      # keys of the optimizers that stepped in the open iteration
        self._last_step_t = 0   # the open iteration's latest optimizer step
        self._closer = None     # the key whose step ends an iteration (learned)
        self._untrained = False  # a batch was asked for and no backward has followed yet

    # -- what the program does ------------------------------------------------

    def wait(self, t0):
        if self._stepped:
            self._end_iteration()  # the next batch: the iteration ended at its last optimizer step.
        elif self._untrained and self._t0:
            self._t0 = t0  # the previous batch was not trained on (evaluation): begin again here.
        if not self._t0:
            self._t0 = t0
        self._untrained = True

    def backward(self, t):
        self._untrained = False
        if not self._t0:
            self._t0 = t

    def zero_grad(self, t):
        if not self._t0:
            self._t0 = t

    def optimizer_step(self, key, t):
        if self.source == SOURCE_PROFILER and self.steps:
            return  # (steps have come from torch.profiler: its numbering goes on)
        self.source = SOURCE_OPTIMIZER
        if key in self._stepped:
            self._end_iteration()  # it steps again: the iteration before ended at its last step.
        if not self._t0:
            self._t0 = t  # (nothing seen before it: the step is its own instant)
        self._stepped.append(key)
        self._last_step_t = t
        if key == self._closer:
            self._close(t)

    def profiler_step(self, t):
        if self.source == SOURCE_OPTIMIZER:
            if self._stepped:
                self._closer = self._stepped[-1]
                self._close(t)
            return
        self.source = SOURCE_PROFILER
        if self._t0:
            self._close(t)
        else:
            self._t0 = t

    def finish(self):
        if self._stepped:
            self._close(self._last_step_t)

    # -- inside -----------------------------------------------------------------

    def _end_iteration(self):
        self._closer = self._stepped[-1]
        self._close(self._last_step_t)

    def _close(self, t):
        if self._t0 and t >= self._t0:
            self._record(self.steps, self._t0, max(t, self._t0 + 1))
            self.steps += 1
        self._t0 = t  # the next step begins where this one ends.
        self._stepped = []
        self._last_step_t = 0
