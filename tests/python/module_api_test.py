"""The Python module's API without a server (ctest "python: module API").

Run with Debian's /usr/bin/python3 and PYTHONPATH=<build>/python. The events
the calls record are read back from this process's own rings with the test
hook _liveprof._drain_local() (no sender runs here, so nothing else drains).
"""

import os
import sys
import threading
import time
import unittest

import liveprof
from liveprof import _liveprof

STAGE_WAIT = _liveprof._STAGES["wait"]
SLEEP_S = 0.02          # a wait long enough to tell from the module's own cost.
SLEEP_MIN_NS = 15_000_000


def drain():
    return _liveprof._drain_local()


def of_kind(events, kind):
    return [e for e in events if e["kind"] == kind]


class ModuleTest(unittest.TestCase):
    def setUp(self):
        liveprof.set_enabled(True)
        liveprof.set_level(2)
        liveprof.set_python_scopes(True)
        drain()

    def test_scope_records_a_host_span_with_its_duration(self):
        with liveprof.scope("forward") as s:
            time.sleep(SLEEP_S)
        self.assertIn("forward", repr(s))
        (e,) = drain()
        self.assertEqual((e["kind"], e["name"]), ("host_span", "forward"))
        self.assertGreaterEqual(e["dur_ns"], SLEEP_MIN_NS)

    def test_nested_scopes_end_innermost_first_and_nest_in_time(self):
        with liveprof.scope("outer"):
            with liveprof.scope("inner"):
                pass
        inner, outer = drain()
        self.assertEqual((inner["name"], outer["name"]), ("inner", "outer"))
        self.assertLessEqual(outer["ts"], inner["ts"])
        self.assertEqual(_liveprof._diagnostics()["span_end_without_begin"], 0)

    def test_an_exception_inside_with_still_ends_the_span_and_propagates(self):
        with self.assertRaises(ZeroDivisionError):
            with liveprof.step(3):
                with liveprof.scope("boom"):
                    1 / 0
        events = drain()
        self.assertEqual([e["name"] for e in of_kind(events, "host_span")], ["boom"])
        self.assertEqual([e["step"] for e in of_kind(events, "step")], [3])
        self.assertEqual(_liveprof._diagnostics()["step_end_without_begin"], 0)

    def test_a_span_object_is_used_once_at_a_time(self):
        s = liveprof.scope("again")
        with s:
            with self.assertRaises(RuntimeError):
                with s:
                    pass
        with s:  # sequential reuse is fine.
            pass
        self.assertEqual(len(drain()), 2)

    def test_the_span_implementation_is_the_one_asked_for(self):
        # The span object in C (liveprof._fast) unless LIVEPROF_PURE_PYTHON=1;
        # the build makes it (python3-dev), so its absence is a failure here.
        pure = os.environ.get("LIVEPROF_PURE_PYTHON") == "1"
        self.assertEqual(_liveprof._fast is None, pure)
        self.assertEqual(type(liveprof.scope("which")).__module__,
                         "liveprof._native" if pure else "liveprof._fast")

    def test_torchrun_launchers_are_not_instrumented(self):
        from liveprof import _autoattach
        saved = getattr(sys, "orig_argv", None)
        try:
            for argv, launcher in (
                    (["python3", "-m", "torch.distributed.run", "--nproc_per_node", "2", "train.py"], True),
                    (["python3", "/usr/local/bin/torchrun", "--standalone", "train.py"], True),
                    (["torchrun", "train.py"], True),
                    (["python3", "-m", "torch.distributed.launch", "train.py"], True),
                    (["python3", "-u", "-X", "dev", "-m", "torch.distributed.run", "train.py"], True),
                    (["python3", "train.py", "-m", "torch.distributed.run"], False),  # (the script's own arguments)
                    (["python3", "train.py", "--nproc_per_node", "2"], False),
                    (["python3", "-m", "mypackage.train"], False)):
                sys.orig_argv = argv
                self.assertEqual(_autoattach._is_launcher(), launcher, argv)
        finally:
            if saved is None:
                del sys.orig_argv
            else:
                sys.orig_argv = saved

    def test_span_handles_ended_twice_or_on_another_thread_record_nothing(self):
        n = _liveprof._name_id("handle")
        h = _liveprof._scope_begin(n)
        self.assertNotEqual(h, 0)
        before = _liveprof._diagnostics()["span_end_without_begin"]
        done = []
        t = threading.Thread(target=lambda: (_liveprof._span_end(h), done.append(1)))
        t.start()
        t.join()
        self.assertEqual(done, [1])
        self.assertEqual(_liveprof._diagnostics()["span_end_without_begin"], before + 1)
        _liveprof._span_end(h)  # its own thread: recorded once...
        _liveprof._span_end(h)  # ...and a second end is refused.
        self.assertEqual(_liveprof._diagnostics()["span_end_without_begin"], before + 2)
        self.assertEqual([e["name"] for e in drain()], ["handle"])

    def test_span_table_full_refuses_and_counts(self):
        n = _liveprof._name_id("deep")
        before = _liveprof._diagnostics()["span_stack_overflow"]
        handles = [_liveprof._scope_begin(n) for _ in range(4096)]
        self.assertEqual(handles[-1], 0)  # 4,095 open at most per thread.
        self.assertNotIn(0, handles[:-1])
        self.assertEqual(len(set(handles[:-1])), 4095)
        self.assertEqual(_liveprof._diagnostics()["span_stack_overflow"], before + 1)
        for h in reversed(handles):
            _liveprof._span_end(h)  # (0: nothing)
        self.assertEqual(len(drain()), 4095)

    def test_generators_suspended_inside_a_scope_close_their_own_span(self):
        def gen(name):
            with liveprof.scope(name):
                yield 1
                yield 2

        a, b = gen("a"), gen("b")
        next(a), next(b), next(a)
        self.assertEqual(list(a), [])  # a ends while b is still open.
        self.assertEqual(list(b), [2])
        self.assertEqual([e["name"] for e in drain()], ["a", "b"])

    def test_levels(self):
        self.assertEqual(liveprof.level(), 2)
        liveprof.set_level(1)
        self.assertEqual(liveprof.level(), 1)
        with liveprof.step(1):
            with liveprof.input("load"):
                pass
            with liveprof.scope("left out at level 1"):
                pass
            liveprof.counter("loss", 0.5)
        self.assertEqual(sorted(e["kind"] for e in drain()), ["counter", "input", "step"])
        liveprof.set_level(0)
        self.assertEqual(liveprof.level(), 1)  # clamped
        liveprof.set_level(3)
        self.assertEqual(liveprof.level(), 3)  # verbose: liveprof run's module hooks
        liveprof.set_level(7)
        self.assertEqual(liveprof.level(), 3)

    def test_the_level_is_read_at_enter(self):
        with liveprof.scope("entered at 2"):
            liveprof.set_level(1)
        liveprof.set_level(1)
        with liveprof.scope("entered at 1"):
            liveprof.set_level(2)
        self.assertEqual([e["name"] for e in drain()], ["entered at 2"])

    def test_python_scopes_switch_leaves_steps_and_input_alone(self):
        self.assertTrue(liveprof.python_scopes())
        liveprof.set_python_scopes(False)
        self.assertFalse(liveprof.python_scopes())
        with liveprof.step(9):
            with liveprof.input():
                pass
            with liveprof.scope("off"):
                pass
        self.assertEqual(sorted(e["kind"] for e in drain()), ["input", "step"])

    def test_disabled_records_nothing(self):
        liveprof.set_enabled(False)
        self.assertFalse(liveprof.enabled())
        with liveprof.step(1), liveprof.input(), liveprof.scope("x"):
            liveprof.counter("c", 1)
            liveprof.instant("i")
        for _ in liveprof.wrap_loader([1, 2], step=0):
            pass
        self.assertEqual(drain(), [])

    def test_input_stage_and_step(self):
        with liveprof.step(4, name="epoch 0"):
            with liveprof.input("decode", stage="preprocess"):
                pass
        events = drain()
        (inp,) = of_kind(events, "input")
        self.assertEqual((inp["name"], inp["sub"]), ("decode", _liveprof._STAGES["preprocess"]))
        (st,) = of_kind(events, "step")
        self.assertEqual((st["name"], st["step"]), ("epoch 0", 4))
        with self.assertRaises(ValueError):
            liveprof.input("x", stage="nope")

    def test_counter_and_instant(self):
        liveprof.counter("queue_depth", 7.25)
        liveprof.instant("checkpoint")
        c, i = drain()
        self.assertEqual((c["kind"], c["name"], c["value"]), ("counter", "queue_depth", 7.25))
        self.assertEqual((i["kind"], i["name"]), ("instant", "checkpoint"))

    def test_names(self):
        with self.assertRaises(TypeError):
            liveprof.scope(3)
        with self.assertRaises(TypeError):
            liveprof.counter(None, 1)
        name = "".join(["dyn", "amic"])  # equal contents, another object.
        self.assertEqual(_liveprof._name_id(name), _liveprof._name_id("dynamic"))
        with liveprof.scope("naïve ünïcode ✓"):
            pass
        self.assertEqual(drain()[0]["name"], "naïve ünïcode ✓")

    def test_wrap_loader_yields_every_batch_unchanged_and_times_each_wait(self):
        class SlowLoader:
            batch_size = 4

            def __init__(self, batches):
                self.batches = batches

            def __iter__(self):
                for b in self.batches:
                    time.sleep(SLEEP_S)
                    yield b

            def __len__(self):
                return len(self.batches)

        batches = [object(), [1, 2], {"x": 3}, None]
        wrapped = liveprof.wrap_loader(SlowLoader(batches))
        self.assertEqual(len(wrapped), 4)
        self.assertEqual(wrapped.batch_size, 4)  # attributes of the wrapped loader.
        got = list(wrapped)
        self.assertEqual(len(got), len(batches))
        for g, b in zip(got, batches):
            self.assertIs(g, b)
        waits = of_kind(drain(), "input")
        self.assertEqual(len(waits), 4)  # the final next() that ends the data is not a batch.
        for w in waits:
            self.assertEqual((w["name"], w["sub"]), ("DataLoader", STAGE_WAIT))
            self.assertGreaterEqual(w["dur_ns"], SLEEP_MIN_NS)

    def test_wrap_loader_inside_a_caller_step_counts_in_that_step(self):
        it = iter(liveprof.wrap_loader(range(3), name="loader"))
        with liveprof.step(0):
            batch = next(it)
        self.assertEqual(batch, 0)
        events = drain()
        (st,) = of_kind(events, "step")
        (w,) = of_kind(events, "input")
        self.assertLessEqual(st["ts"], w["ts"])
        self.assertEqual(w["name"], "loader")

    def test_wrap_loader_marks_steps(self):
        wrapped = liveprof.wrap_loader(range(3), step=10)
        for _ in wrapped:
            time.sleep(0.001)
        events = drain()
        steps = of_kind(events, "step")
        waits = of_kind(events, "input")
        self.assertEqual([s["step"] for s in steps], [10, 11, 12])
        self.assertEqual(len(waits), 3)
        for s, w in zip(steps, waits):
            # A step begins as it asks for its batch, at the same clock
            # reading as its wait: inside it.
            self.assertLessEqual(s["ts"], w["ts"])
            self.assertLessEqual(w["ts"] + w["dur_ns"], s["ts"] + s["dur_ns"] + 1000)
        # Steps follow one another with no gap.
        for a, b in zip(steps, steps[1:]):
            self.assertLess(a["ts"], b["ts"])
        # The next epoch goes on numbering from there.
        self.assertEqual(wrapped.next_step, 13)
        for _ in wrapped:
            break  # step 13 ends as the loop's iterator goes away.
        self.assertEqual([s["step"] for s in of_kind(drain(), "step")], [13])
        it = iter(wrapped)
        next(it)  # step 14 open while `it` lives...
        for _ in wrapped:  # ...a new epoch ends it first.
            pass
        self.assertEqual([s["step"] for s in of_kind(drain(), "step")], [14, 15, 16, 17])
        self.assertEqual(wrapped.next_step, 18)

    def test_wrap_loader_left_with_break_ends_its_step(self):
        def loop():
            for i, _ in enumerate(liveprof.wrap_loader(range(100), step=0)):
                if i == 2:
                    break

        loop()  # the iterator goes away with the frame.
        self.assertEqual([s["step"] for s in of_kind(drain(), "step")], [0, 1, 2])

    def test_each_thread_records_on_its_own_track(self):
        def work():
            with liveprof.scope("in a thread"):
                pass

        t = threading.Thread(target=work)
        t.start()
        t.join()
        with liveprof.scope("main"):
            pass
        events = {e["name"]: e for e in drain()}
        self.assertNotEqual(events["in a thread"]["track"], events["main"]["track"])

    def test_status_and_a_bad_address(self):
        st = liveprof.status()
        for key in ("running", "connected", "events_sent", "batches_acked", "last_error", "events_recorded",
                    "events_delivered", "events_lost", "events_unsent_at_stop", "events_resent"):
            self.assertIn(key, st)
        self.assertEqual(st["events_lost"], st["events_ring_dropped"] + st["events_dropped_unacked"]
                         + st["events_unsent_at_stop"])
        self.assertFalse(st["running"])
        with self.assertRaises(RuntimeError):
            liveprof.connect("carrier-pigeon:coop 7")
        liveprof.disconnect()  # idempotent, nothing to do.


if __name__ == "__main__":
    sys.exit(0 if unittest.main(exit=False, verbosity=2).result.wasSuccessful() else 1)
