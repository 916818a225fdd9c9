#!/usr/bin/env python3
"""bench/process_vs.py's own logic: each benchmark's output parsed into figures
(real outputs below, the base's ceff65c and this checkout's), new/base oriented so
that > 1 is better, the verdict, must-hold figures, and the exit status's count.
No benchmark is run: python3 bench/process_vs_test.py (ctest: "bench: process_vs.py's table: ...").
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import process_vs as pv  # noqa: E402

# Captured 2026-11-29 on the cpp machine; ceff65c's binaries print no thread lines in
# ingest_bench and an unnamed pipeline thread in web_feed_bench.

# ceff65c: ingest_bench --senders 8 --rate 500000 --seconds 3 --warmup 1
INGEST_BASE = """\
ingest_bench: 8 senders x 500000 events/s over unix:/tmp/liveprof-ingest-bench-29388.sock, 3 s (+1 s warm-up), sender rings of 65536
liveprof: ingest source 1 (rank 2, unix:/tmp/liveprof-ingest-bench-29388.sock) closed: send: Broken pipe
liveprof: ingest source 5 (rank 1, unix:/tmp/liveprof-ingest-bench-29388.sock) closed: send: Broken pipe
recorded 16000000, sent 16000000, received 16000000 (8 connections)
lost: sender rings 0, unacknowledged 0 (+0 dropped), server rings 0, lost batches 0, duplicates skipped 0
steady: 4.00 M events/s into the server, its CPU 0.78 cores = 0.194 cores per 1 M events/s
pipeline: 45 publications, stream dropped 0
trace store: 16000000 events in 93 MiB (6.1 bytes each), 0 freed by its budget
malloc: 228 MiB in use, 7 MiB free in its heaps, 60 MiB mapped apart
PASS: 0 events lost (0 lost), taken as they come (4.00 of 4.00 M events/s)
"""

# this checkout, the same flags (its thread lines are new)
INGEST_NEW = """\
ingest_bench: 8 senders x 500000 events/s over unix:/tmp/liveprof-ingest-bench-30263.sock, 3 s (+1 s warm-up), sender rings of 65536
recorded 16000000, sent 16000000, received 16000000 (8 connections)
lost: sender rings 0, unacknowledged 0 (+0 dropped), server rings 0, lost batches 0, duplicates skipped 0
steady: 4.00 M events/s into the server, its CPU 1.01 cores = 0.251 cores per 1 M events/s
  thread 30263   ingest_bench     main             0.0%
  thread 30274   liveprof pipe    server          58.0%
  thread 30275   liveprof drain   server          20.6%
  thread 30276   liveprof ingest  server          22.0%
pipeline: 49 publications, stream dropped 0
trace store: 16000000 events in 93 MiB (6.1 bytes each), 0 freed by its budget
malloc: 146 MiB in use, 20 MiB free in its heaps, 27 MiB mapped apart
PASS: 0 events lost (0 lost), taken as they come (4.00 of 4.00 M events/s)
"""

# this checkout: --senders 2 --rate 500000 --ring-capacity 16 --seconds 1 --warmup 0.5 (drops)
INGEST_MISS = """\
ingest_bench: 2 senders x 500000 events/s over unix:/tmp/liveprof-ingest-bench-30418.sock, 1 s (+0 s warm-up), sender rings of 16
liveprof: ingest source 1 (rank 1, unix:/tmp/liveprof-ingest-bench-30418.sock) closed: closed by the sender
liveprof: ingest source 2 (rank 0, unix:/tmp/liveprof-ingest-bench-30418.sock) closed: closed by the sender
recorded 1500000, sent 9712, received 9712 (2 connections)
lost: sender rings 1490288, unacknowledged 0 (+0 dropped), server rings 0, lost batches 0, duplicates skipped 0
steady: 0.01 M events/s into the server, its CPU 0.04 cores = 6.293 cores per 1 M events/s
  thread 30418   ingest_bench     main             0.0%
  thread 30421   liveprof pipe    server           1.0%
  thread 30422   liveprof drain   server           2.0%
  thread 30423   liveprof ingest  server           0.0%
pipeline: 24 publications, stream dropped 0
trace store: 9712 events in 0 MiB (9.2 bytes each), 0 freed by its budget
malloc: 1 MiB in use, 1 MiB free in its heaps, 17 MiB mapped apart
MISS: 0 events lost (1490288 lost), taken as they come (0.01 of 1.00 M events/s)
"""

# ceff65c: web_feed_bench --clients 100 --rate 1000000 --seconds 3 --warmup 2
WEB_FEED_BASE = """\
web_feed_bench: 100 clients x 8 view topics, 1.00 M events/s asked, device flush 10 ms, ring capacity 1048576, warm-up 2.0 s, measured 3.0 s, 2 CPUs online
workload  time scale 1/83 (model time runs 83x faster than at its own rate)
ingest    1.006 M events/s achieved (3019659 events in 3.00 s), 0 dropped, 0 late (past the watermark; slack 10 ms)
feed      7994.3 frames/s, 178.69 MB/s delivered; per client 79.9..79.9 frames/s; 0 of 100 clients closed
server    view frames sent 24000, replaced 0, sessions closed blocked 0, websocket sessions 100
latency   event end -> frame written: p50 69 ms, p99 120 ms, max 130 ms (2399948 samples)
pipeline  30 publications (10.0/s); publication lag (published - watermark) over 30: p50 10.3 ms, p99 20.0 ms, max 20.0 ms; publish period p50 99.9 ms, max 105.8 ms
render    p50 1.6 ms, p99 2.1 ms, max 2.1 ms per publication; views 178 KB first, 180 KB last
cpu       web thread 6.8% of one core; process 64.7% (of 200%)
  thread 29356   web_feed_bench   main (bench)     0.0%
  thread 29357   liveprof web     web (server)     7.0%
  thread 29358   web_feed_bench   pipeline        30.3%
  thread 29359   web_feed_bench   sim producer    15.7%
  thread 29360   web_feed_bench   sim producer     7.3%
  thread 29361   bench clients    bench clients    4.7%
diag      step_without_compute=1
PASS  ingest drops == 0 (0)
PASS  p99 latency <= 150 ms (120 ms)
"""

# this checkout, the same flags
WEB_FEED_NEW = """\
web_feed_bench: 100 clients x 8 view topics, 1.00 M events/s asked, device flush 10 ms, ring capacity 1048576, warm-up 2.0 s, measured 3.0 s, 2 CPUs online
workload  time scale 1/83 (model time runs 83x faster than at its own rate)
ingest    1.007 M events/s achieved (3023636 events in 3.00 s), 0 dropped, 0 late (past the watermark; slack 10 ms)
feed      7989.1 frames/s, 201.52 MB/s delivered; per client 79.9..79.9 frames/s; 0 of 100 clients closed
server    view frames sent 24000, replaced 0, sessions closed blocked 0, websocket sessions 100
latency   event end -> frame written: p50 73 ms, p99 131 ms, max 149 ms (2395103 samples)
pipeline  30 publications (10.0/s); publication lag (published - watermark) over 30: p50 10.3 ms, p99 38.8 ms, max 38.8 ms; publish period p50 99.8 ms, max 113.4 ms
render    p50 1.4 ms, p99 2.1 ms, max 2.1 ms per publication; views 200 KB first, 204 KB last
cpu       web thread 7.4% of one core; process 84.2% (of 200%)
  thread 29362   web_feed_bench   main (bench)     0.3%
  thread 29363   web_feed_bench                    0.0%
  thread 29364   web_feed_bench                    0.0%
  thread 29365   web_feed_bench                    0.0%
  thread 29366   web_feed_bench                    0.0%
  thread 29367   liveprof web     web (server)     7.3%
  thread 29368   liveprof pipe    pipeline        44.9%
  thread 29369   liveprof drain   pipeline         6.7%
  thread 29370   web_feed_bench   sim producer    14.3%
  thread 29371   web_feed_bench   sim producer     7.0%
  thread 29372   bench clients    bench clients    3.7%
diag      events_without_step=199 step_without_compute=9 launch_without_device=1323
PASS  ingest drops == 0 (0)
PASS  p99 latency <= 150 ms (131 ms)
"""

# this checkout: fleet_bench --ranks 200 --seconds 3 --warmup 1 (ceff65c has no fleet_bench)
FLEET = """\
fleet_bench: 200 ranks in 25 agents, 10 steps/s each (2000 summaries/s), 3s after 1s warm-up
  view: 1964 summaries/s applied (offered 2000), lag step end -> render p50 137 ms, p99 266 ms, max 277 ms (7728 samples)
  view: CPU 9.8 % of a core, peak RSS 14 MiB, render 3.9 ms (last), 17 renders
  nats-server: CPU 17.7 % of a core, RSS 37 MiB (max)
  agents: CPU 9.7 % of a core for 200 ranks: 0.048 % of a core per rank; 0 windows resent
  summaries: 7972 published, 0 dropped, 0 unsent; the view holds 7972, 0 missing, 0 twice
PASS lag p99 <= 1000 ms (266 ms)
PASS 0 summaries lost (7972 published, 7972 held)
"""


def runs(parser, *texts):
    return [parser(t) for t in texts]


class ParseIngest(unittest.TestCase):
    def test_base_without_thread_lines(self):
        f = pv.parse_ingest_bench(INGEST_BASE)
        self.assertEqual(f["server CPU per 1 M events/s"], 0.194)
        self.assertEqual(f["server CPU"], 0.78)
        self.assertEqual(f["steady rate into the server"], 4.0)
        self.assertEqual(f["events lost"], 0)
        self.assertEqual(f["malloc in use"], 228)
        self.assertFalse([n for n in f.items if n.startswith("thread ")])
        self.assertEqual(f.items["server CPU per 1 M events/s"][2], pv.LOWER)
        self.assertEqual(f.items["steady rate into the server"][2], pv.HIGHER)
        self.assertEqual(f.items["events lost"][2], ("equal", 0))

    def test_new_with_thread_lines(self):
        f = pv.parse_ingest_bench(INGEST_NEW)
        self.assertEqual(f["server CPU per 1 M events/s"], 0.251)
        self.assertEqual(f["thread liveprof pipe"], 58.0)
        self.assertEqual(f["thread liveprof drain"], 20.6)
        self.assertEqual(f["thread liveprof ingest"], 22.0)
        self.assertEqual(f["thread ingest_bench"], 0.0)

    def test_losses(self):
        f = pv.parse_ingest_bench(INGEST_MISS)
        self.assertEqual(f["events lost"], 1490288)
        self.assertEqual(f["sender ring drops"], 1490288)
        self.assertEqual(f["server ring drops"], 0)
        self.assertEqual(f["server CPU per 1 M events/s"], 6.293)


class ParseWebFeed(unittest.TestCase):
    def test_base_one_unnamed_pipeline_thread(self):
        f = pv.parse_web_feed_bench(WEB_FEED_BASE)
        # web 7.0 + pipeline 30.3: not main, the sim producers or the clients.
        self.assertAlmostEqual(f["liveprof threads (all but the bench's own)"], 37.3)
        self.assertAlmostEqual(f["pipeline threads (pipeline + drain)"], 30.3)
        self.assertEqual(f["web thread"], 6.8)
        self.assertEqual(f["thread pipeline: web_feed_bench"], 30.3)
        self.assertAlmostEqual(f["thread sim producer: web_feed_bench"], 23.0)  # two threads, summed
        self.assertEqual(f.items["thread sim producer: web_feed_bench"][2], pv.INFO_COST)
        self.assertEqual(f["feed latency p50"], 69)
        self.assertEqual(f["feed latency p99"], 120)
        self.assertEqual(f["ingest achieved"], 1.006)
        self.assertEqual(f["ingest dropped"], 0)
        self.assertEqual(f["clients closed"], 0)
        self.assertEqual(f["publication lag p99"], 20.0)
        self.assertEqual(f["render p50"], 1.6)

    def test_new_pipe_and_drain(self):
        f = pv.parse_web_feed_bench(WEB_FEED_NEW)
        # web 7.3 + pipe 44.9 + drain 6.7 + four idle unlabelled pool threads.
        self.assertAlmostEqual(f["liveprof threads (all but the bench's own)"], 58.9)
        self.assertAlmostEqual(f["pipeline threads (pipeline + drain)"], 51.6)
        self.assertEqual(f["thread pipeline: liveprof pipe"], 44.9)
        self.assertEqual(f["thread pipeline: liveprof drain"], 6.7)
        self.assertEqual(f["thread (unlabelled): web_feed_bench"], 0.0)
        self.assertEqual(f["feed latency p99"], 131)
        self.assertEqual(f["feed latency max"], 149)

    def test_thread_line_columns(self):
        # A name with a space, an empty label, a wide tid.
        t = pv._thread_lines("  thread 12345678 liveprof web                    7.5%\n"
                             "  thread 7       bench clients    bench clients   12.0%\n")
        self.assertEqual(t, [(12345678, "liveprof web", "", 7.5), (7, "bench clients", "bench clients", 12.0)])


class ParseFleet(unittest.TestCase):
    def test_fleet(self):
        f = pv.parse_fleet_bench(FLEET)
        self.assertEqual(f["view lag p99"], 266)
        self.assertEqual(f["summaries applied"], 1964)
        self.assertEqual(f["view CPU"], 9.8)
        self.assertEqual(f["agents CPU per rank"], 0.048)
        self.assertEqual(f["summaries not held"], 0)
        self.assertEqual(f["summaries twice"], 0)
        self.assertEqual(f.items["nats-server CPU"][2], pv.INFO_COST)

    def test_key_figure_missing_in_a_crash(self):
        for bench, parse in pv.PARSERS.items():
            self.assertNotIn(pv.KEY_FIGURE[bench], parse("Segmentation fault\n"))


class Compare(unittest.TestCase):
    def test_cost_inverted(self):
        # 0.2 cores per 1 M ev/s at the base, 0.1 here: twice as good.
        self.assertEqual(pv.compare([0.19, 0.2, 0.21], [0.09, 0.1, 0.11], pv.LOWER), (2.0, "faster"))
        self.assertEqual(pv.compare([0.09, 0.1, 0.11], [0.19, 0.2, 0.21], pv.LOWER), (0.5, "slower"))

    def test_rate_as_rate(self):
        self.assertEqual(pv.compare([10, 10, 10], [15, 15, 15], pv.HIGHER), (1.5, "faster"))
        self.assertEqual(pv.compare([15, 15, 15], [10, 11, 12], pv.HIGHER)[1], "slower")

    def test_overlapping_ranges_are_same(self):
        ratio, verdict = pv.compare([100, 120, 200], [110, 150, 160], pv.LOWER)
        self.assertAlmostEqual(ratio, 0.8)
        self.assertEqual(verdict, "same")

    def test_apart_but_under_3_percent_is_same(self):
        ratio, verdict = pv.compare([100, 100.5, 101], [102, 102.5, 103], pv.LOWER)
        self.assertLess(ratio, 1)
        self.assertGreater(ratio, 0.97)
        self.assertEqual(verdict, "same")

    def test_info_has_no_verdict(self):
        self.assertEqual(pv.compare([100], [200], pv.INFO), (2.0, "info (new/base as is)"))
        self.assertEqual(pv.compare([100], [200], pv.INFO_COST), (0.5, "info"))

    def test_zeros(self):
        self.assertEqual(pv.compare([0, 0], [0, 0], pv.LOWER), (1.0, "same"))
        self.assertEqual(pv.compare([1, 1], [0, 0], pv.LOWER), (float("inf"), "faster"))

    def test_must_hold(self):
        self.assertEqual(pv.compare([0, 0], [0, 0], pv.must_be(0)), (None, "ok"))
        self.assertEqual(pv.compare([0, 0], [0, 3], pv.must_be(0)), (None, "MISS"))


class Table(unittest.TestCase):
    def test_web_feed_rows(self):
        base = runs(pv.parse_web_feed_bench, WEB_FEED_BASE, WEB_FEED_BASE)
        new = runs(pv.parse_web_feed_bench, WEB_FEED_NEW, WEB_FEED_NEW)
        rows, bad = pv.table(base, new)
        by = {r[0]: r for r in rows}
        self.assertEqual(by["liveprof threads (all but the bench's own)"][2:], ("37.3 [37.3-37.3]", "58.9 [58.9-58.9]",
                                                                                "0.63", "slower"))
        self.assertEqual(by["feed latency p99"][4:], ("0.92", "slower"))
        self.assertEqual(by["ingest dropped"][4:], ("must be 0", "ok"))
        self.assertEqual(by["thread pipeline: liveprof drain"][2:], ("—", "6.7 [6.7-6.7]", "—", "only in new"))
        self.assertEqual(by["thread pipeline: web_feed_bench"][5], "only in base")
        self.assertEqual(by["feed bytes"][4:], ("1.13", "info (new/base as is)"))
        # The bench's own threads, as a cost: 23.0 / 21.3.
        self.assertEqual(by["thread sim producer: web_feed_bench"][4:], ("1.08", "info"))
        self.assertEqual(by["process"][4:], ("0.77", "info"))  # 64.7 / 84.2
        slower = [r[0] for r in rows if r[5] == "slower"]
        self.assertEqual(bad, len(slower))
        self.assertIn("pipeline threads (pipeline + drain)", slower)
        # The new output's order first: the target's figure heads the table.
        self.assertEqual(rows[0][0], "liveprof threads (all but the bench's own)")

    def test_ingest_base_vs_new_and_a_loss(self):
        base = runs(pv.parse_ingest_bench, INGEST_BASE, INGEST_BASE, INGEST_BASE)
        new = runs(pv.parse_ingest_bench, INGEST_NEW, INGEST_NEW, INGEST_NEW)
        rows, bad = pv.table(base, new)
        by = {r[0]: r for r in rows}
        self.assertEqual(by["server CPU per 1 M events/s"][2:], ("0.194 [0.194-0.194]", "0.251 [0.251-0.251]",
                                                                  "0.77", "slower"))
        self.assertEqual(by["malloc in use"][4:], ("1.56", "faster"))
        self.assertEqual(by["events lost"][4:], ("must be 0", "ok"))
        self.assertEqual(by["thread liveprof drain"][5], "only in new")
        self.assertEqual(bad, 2)  # CPU per 1 M ev/s, CPU
        rows, bad = pv.table(base, new[:2] + runs(pv.parse_ingest_bench, INGEST_MISS))
        by = {r[0]: r for r in rows}
        self.assertEqual(by["events lost"][3:], ("0 [0-1.49M]", "must be 0", "MISS"))
        self.assertEqual(by["sender ring drops"][5], "MISS")
        self.assertEqual(by["server ring drops"][5], "ok")

    def test_same_runs_are_same(self):
        r = runs(pv.parse_fleet_bench, FLEET, FLEET)
        rows, bad = pv.table(r, r)
        self.assertEqual(bad, 0)
        self.assertEqual({x[5] for x in rows}, {"same", "ok", "info"})
        self.assertEqual({x[4] for x in rows if x[5] != "ok"}, {"1.00"})

    def test_markdown(self):
        import io
        out = io.StringIO()
        pv.print_table([("a", "ms", "1 [1-1]", "2 [2-2]", "0.50", "slower")], True, out)
        self.assertEqual(out.getvalue().splitlines(),
                         ["| figure | unit | base median [min-max] | new median [min-max] | new/base | verdict |",
                          "|---|---|---|---|---|---|", "| a | ms | 1 [1-1] | 2 [2-2] | 0.50 | slower |"])


class Usage(unittest.TestCase):
    def test_usage_errors_exit_2(self):
        for argv in (["HEAD", "--bench", "no_such_bench"], ["HEAD"],
                     ["no-such-revision-xyz", "--bench", "ingest_bench", "--no-build"]):
            with self.assertRaises(SystemExit) as e, open(os.devnull, "w") as null:
                stderr, sys.stderr = sys.stderr, null
                try:
                    pv.main(argv)
                finally:
                    sys.stderr = stderr
            self.assertEqual(e.exception.code, 2, argv)


if __name__ == "__main__":
    unittest.main()
