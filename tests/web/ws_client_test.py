#!/usr/bin/python3
"""A third-party client against `liveprof demo`: Debian's python3-websockets
(asyncio API) on /ws, urllib on /api and /metrics, python3-flatbuffers with
code that flatc generates from src/stream/liveprof.fbs at test time.

  ws_client_test.py --liveprof BIN --flatc FLATC --schema liveprof.fbs

Exit 0 when every check passes; else one line "FAIL: <check>: <values>", exit 1.
"""
import argparse, asyncio, json, os, re, subprocess, sys, tempfile, time, urllib.request

import websockets  # Debian's python3-websockets 10.4: asyncio API only.

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from liveprof_server import LISTENING, Proc  # noqa: E402  (tests/python/liveprof_server.py)

VIEW_TOPICS = ["overview", "steps", "input_pipeline", "tf_stats", "kernel_stats", "memory",
               "alerts", "status", "pod", "modules", "annotations"]
ALL_TOPICS = VIEW_TOPICS + ["events"]
# liveprof.fbs's EventKind, read from flatc's generated class
# (generate_flatbuffers): value -> name, and the kernel kind's value.
KIND_NAMES = {}
KIND_KERNEL = None
MAX_EVENT_FRAMES_QUEUED = 8  # websocket_session.cc: kMaxEventFrames


class CheckFailed(Exception):
    pass


def check(ok, what, **values):
    if not ok:
        shown = ", ".join(f"{k}={str(v)[:400]}" for k, v in values.items())
        raise CheckFailed(f"{what}: {shown}" if shown else what)


def first_diff(a, b, path="$"):
    """Where two JSON values first differ (REST `a` vs WebSocket `b`), or None."""
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        return next((d for k in a if (d := first_diff(a[k], b[k], f"{path}.{k}"))), None)
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return next((d for i, (x, y) in enumerate(zip(a, b)) if (d := first_diff(x, y, f"{path}[{i}]"))), None)
    return None if a == b else f"{path}: {str(a)[:150]} vs {str(b)[:150]}"


# ---- The server under test: tests/python/liveprof_server.py's Proc ----

def output(server):
    return " | ".join(server.log)[-2000:]


def http_get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return r.read().decode()


def generate_flatbuffers(flatc, schema, outdir):
    """Python readers for the schema, generated now and imported from outdir."""
    subprocess.run([flatc, "--python", "-o", outdir, schema], check=True)
    sys.path.insert(0, outdir)
    from liveprof.wire import Body, EventFrame, EventKind, Frame  # noqa: E402 (generated)
    global KIND_KERNEL
    KIND_NAMES.update({v: k for k, v in vars(EventKind.EventKind).items() if not k.startswith("_")})
    KIND_KERNEL = EventKind.EventKind.kernel
    return Frame.Frame, EventFrame.EventFrame, Body.Body


# ---- The WebSocket client: one reader task keeps everything it receives ----

class Client:
    def __init__(self, ws):
        self.ws = ws
        self.frames = {t: {} for t in VIEW_TOPICS}  # topic -> seq -> view model
        self.seqs = {t: [] for t in VIEW_TOPICS}    # topic -> seqs in arrival order
        self.arrivals = []                          # every data frame's topic, in order
        self.event_frames = []                      # binary frames (bytes)
        self.bad_frames = []                        # view frames with a wrong v or seq
        self.control = asyncio.Queue()              # (index into arrivals, message)
        self.task = asyncio.create_task(self._pump())

    async def _pump(self):
        try:
            async for msg in self.ws:
                if isinstance(msg, bytes):
                    self.event_frames.append(msg)
                    self.arrivals.append("events")
                    continue
                m = json.loads(msg)
                if m.get("type") not in VIEW_TOPICS:
                    await self.control.put((len(self.arrivals), m))
                    continue
                if m.get("v") != 1 or not isinstance(m.get("seq"), int):
                    self.bad_frames.append(msg[:200])
                self.frames[m["type"]][m.get("seq")] = m
                self.seqs[m["type"]].append(m.get("seq"))
                self.arrivals.append(m["type"])
        except websockets.ConnectionClosed:
            pass  # closed_reason() says how; the checks notice.

    def closed_reason(self):
        return f"connection closed: code={self.ws.close_code} reason={self.ws.close_reason!r}"

    async def next_control(self, waiting_for, timeout=3.0):
        try:
            return await asyncio.wait_for(self.control.get(), timeout)
        except asyncio.TimeoutError:
            raise CheckFailed(f"no {waiting_for} reply within {timeout} s"
                              + (f" ({self.closed_reason()})" if self.task.done() else ""))

    async def frame(self, topic, seq, timeout=3.0):
        """The view frame of `topic` with `seq`, waiting for it if needed."""
        deadline = time.monotonic() + timeout
        while seq not in self.frames[topic] and time.monotonic() < deadline and not self.task.done():
            await asyncio.sleep(0.02)
        check(seq in self.frames[topic], f"no WebSocket {topic} frame with the REST reply's seq", seq=seq,
              ws_seqs=f"{self.seqs[topic][:1]}..{self.seqs[topic][-1:]}")
        return self.frames[topic][seq]


# ---- Checks, in the order they run ----

async def check_hello(c):
    _, m = await c.next_control("hello")
    check(m.get("type") == "hello" and m.get("v") == 1, "hello: type/v", message=m)
    check(m.get("topics") == ALL_TOPICS, "hello: topics", got=m.get("topics"), want=ALL_TOPICS)
    ev = m.get("events", {})
    check(ev.get("encoding") == "flatbuffers" and ev.get("file_identifier") == "LPF1"
          and ev.get("frame_version") == 1, "hello: events encoding", events=ev)
    # The kind names the hello lists are the schema's (flatc's generated EventKind).
    want_kinds = {str(v): k for v, k in KIND_NAMES.items()}
    check(ev.get("kinds") == want_kinds and want_kinds.get("20") == "kernel", "hello: events.kinds",
          got=ev.get("kinds"), want=want_kinds)


async def check_subscribe(c):
    await c.ws.send(json.dumps({"type": "subscribe", "topics": ALL_TOPICS, "filters": {"kinds": ["kernel"]}}))
    _, m = await c.next_control("subscribed")
    check(m.get("type") == "subscribed" and sorted(m.get("topics", [])) == sorted(ALL_TOPICS)
          and m.get("filters", {}).get("kinds") == ["kernel"], "subscribe: reply", reply=m)


def check_view_streams(c, min_frames):
    check(not c.bad_frames, "view frames with v != 1 or no integer seq", frames=c.bad_frames)
    for t in VIEW_TOPICS:
        s = c.seqs[t]
        check(len(s) >= min_frames, f"{t}: too few frames", got=len(s), want=f">= {min_frames}")
        gaps = [(a, b) for a, b in zip(s, s[1:]) if b != a + 1]
        check(not gaps, f"{t}: seq not contiguous (previous, next)", gaps=gaps[:5], frames=len(s))


def check_same_generation(c):
    """Frames of one seq come from one publication: what several views share agrees."""
    common = set.intersection(*(set(c.frames[t]) for t in VIEW_TOPICS))
    check(len(common) >= 5, "too few seqs received on every view topic", common=sorted(common))
    for seq in sorted(common):
        f = {t: c.frames[t][seq] for t in VIEW_TOPICS}
        check(f["overview"]["summary"] == f["steps"]["window"] == f["input_pipeline"]["window"],
              "same seq, different step windows (overview.summary, steps.window, input_pipeline.window)",
              seq=seq, overview=f["overview"]["summary"], steps=f["steps"]["window"])
        check(f["status"]["steps_closed"] == f["steps"]["steps_total"],
              "same seq, status.steps_closed != steps.steps_total", seq=seq,
              status=f["status"]["steps_closed"], steps=f["steps"]["steps_total"])
        check(f["overview"]["run_environment"] == f["status"]["run_environment"],
              "same seq, overview/status run_environment differ", seq=seq)


async def check_rest_agrees(c, port):
    for topic in ["overview", "kernel_stats", "status", "steps"]:
        rest = json.loads(await asyncio.to_thread(http_get, port, f"/api/{topic}"))
        ws = await c.frame(topic, rest.get("seq"))
        if topic == "status":
            check(isinstance(rest.pop("server", None), dict), "/api/status has no 'server' object")
        diff = first_diff(rest, ws)
        check(diff is None, f"/api/{topic} differs from the WebSocket frame of seq {rest['seq']}", at=diff)
    last5 = json.loads(await asyncio.to_thread(http_get, port, "/api/steps?last=5"))
    steps = [r["step"] for r in last5.get("rows", [])]
    check(len(steps) == 5 and steps == list(range(steps[0], steps[0] + 5)),
          "/api/steps?last=5: not 5 consecutive steps", steps=steps)
    ws_rows = (await c.frame("steps", last5["seq"]))["rows"]
    ws_last = ws_rows[-1]["step"] if ws_rows else -1
    check(steps[0] >= ws_last - 5 and steps[-1] >= ws_last,
          "/api/steps?last=5: not the last steps of the published view", rest_steps=steps,
          ws_seq=last5["seq"], ws_last_step=ws_last)


def check_events(c, Frame, EventFrame, Body):
    frames = c.event_frames
    check(len(frames) >= 10, "too few binary event frames", got=len(frames))
    names, tracks, last_seq, n_events = set(), set(), 0, 0
    for i, buf in enumerate(frames):
        check(buf[4:8] == b"LPF1" and Frame.FrameBufferHasIdentifier(buf, 0),
              "event frame without the LPF1 identifier", frame=i, head=buf[:8])
        frame = Frame.GetRootAs(buf, 0)
        check(frame.Version() == 1 and frame.BodyType() == Body.EventFrame,
              "event frame: version/body type", frame=i, version=frame.Version(), body=frame.BodyType())
        ef, body = EventFrame(), frame.Body()
        ef.Init(body.Bytes, body.Pos)
        check(ef.Seq() > last_seq, "event frame seq does not increase", frame=i, seq=ef.Seq(), previous=last_seq)
        check(ef.Dropped() == 0 and ef.DroppedTotal() == 0, "event frame dropped events", frame=i,
              seq=ef.Seq(), dropped=ef.Dropped(), dropped_total=ef.DroppedTotal())
        last_seq = ef.Seq()
        names.update(ef.Names(j).Id() for j in range(ef.NamesLength()))
        tracks.update(ef.Tracks(j).Id() for j in range(ef.TracksLength()))
        for j in range(ef.EventsLength()):
            e = ef.Events(j)
            check(e.Kind() == KIND_KERNEL, "event of a kind the filter excludes", frame=i, kind=e.Kind())
            check(e.Name() in names, "event name id not defined by an earlier NameDef", frame=i,
                  seq=ef.Seq(), name=e.Name(), names_defined=len(names))
            check(e.Track() in tracks, "event track id not defined by an earlier TrackDef", frame=i,
                  seq=ef.Seq(), track=e.Track())
        n_events += ef.EventsLength()
    check(n_events > 0, "no kernel events in the event frames", frames=len(frames))
    return n_events


async def check_errors(c):
    before = {t: len(c.seqs[t]) for t in VIEW_TOPICS}
    probes = [("malformed JSON", "{not json", "bad_json", "json"),
              ("unknown topic", json.dumps({"type": "subscribe", "topics": ["no_such_topic"]}),
               "unknown_topic", "no_such_topic"),
              ("binary garbage", b"\x00\xff\x13garbage", "bad_message", "binary")]
    for what, payload, code, named in probes:
        await c.ws.send(payload)
        _, m = await c.next_control(f"error to {what}")
        check(m.get("type") == "error" and m.get("code") == code, f"{what}: reply", reply=m, want_code=code)
        check(named in m.get("message", "").lower(), f"{what}: error message does not name the problem",
              message=m.get("message"), want_substring=named)
    await asyncio.sleep(1.5)
    check(not c.task.done(), "connection closed after the bad messages", reason=c.closed_reason())
    for t in VIEW_TOPICS:
        check(len(c.seqs[t]) - before[t] >= 5, f"{t}: frames stopped after the bad messages",
              new_frames=len(c.seqs[t]) - before[t])
    check_view_streams(c, min_frames=0)


async def check_unsubscribe(c):
    rest = [t for t in ALL_TOPICS if t != "alerts"]
    await c.ws.send(json.dumps({"type": "unsubscribe", "topics": rest}))
    index, m = await c.next_control("subscribed (after unsubscribe)")
    check(m.get("type") == "subscribed" and m.get("topics") == ["alerts"] and "filters" not in m,
          "unsubscribe: reply", reply=m)
    alerts_before = len(c.seqs["alerts"])
    await asyncio.sleep(1.0)
    after = c.arrivals[index:]
    others = [t for t in after if t not in ("alerts", "events")]
    check(not others, "view frames of unsubscribed topics after the 'subscribed' reply", topics=others)
    # Event frames the server had queued before the unsubscribe (at most 8) may still come.
    late_events = after.count("events")
    check(late_events <= MAX_EVENT_FRAMES_QUEUED, "event frames after the unsubscribe beyond those queued",
          count=late_events, order=after[:20])
    check(len(c.seqs["alerts"]) - alerts_before >= 5, "alerts frames stopped after the unsubscribe",
          new_frames=len(c.seqs["alerts"]) - alerts_before)
    check_view_streams(c, min_frames=0)
    return late_events


def check_metrics(port):
    text = http_get(port, "/metrics")
    p = subprocess.run(["/usr/bin/promtool", "check", "metrics"], input=text, capture_output=True, text=True,
                       timeout=30)
    check(p.returncode == 0, "promtool check metrics", exit_code=p.returncode,
          output=(p.stdout + p.stderr).strip().replace("\n", " | "))
    m = re.search(r"^liveprof_events_consumed_total(?:\{[^}]*\})? (\S+)$", text, re.M)
    check(m is not None and float(m.group(1)) > 0, "/metrics: liveprof_events_consumed_total absent or 0",
          line=m.group(0) if m else None)


async def run_checks(port, fb):
    async with websockets.connect(f"ws://127.0.0.1:{port}/ws", max_size=1 << 24) as ws:
        c = Client(ws)
        await check_hello(c)
        await check_subscribe(c)
        await asyncio.sleep(3.0)
        check(not c.task.done(), "WebSocket closed while receiving", reason=c.closed_reason())
        check_view_streams(c, min_frames=10)
        check_same_generation(c)
        await check_rest_agrees(c, port)
        n_events = check_events(c, *fb)
        await check_errors(c)
        late = await check_unsubscribe(c)
        check_metrics(port)
        print(f"ok: {sum(map(len, c.seqs.values()))} view frames, seq {c.seqs['alerts'][0]}.."
              f"{c.seqs['alerts'][-1]} on alerts; {len(c.event_frames)} event frames, {n_events} kernel events; "
              f"{late} event frames after the unsubscribe")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--liveprof", required=True)
    ap.add_argument("--flatc", required=True)
    ap.add_argument("--schema", required=True)
    args = ap.parse_args()
    start, server = time.monotonic(), None
    with tempfile.TemporaryDirectory(prefix="liveprof_fb_") as tmp:
        try:
            fb = generate_flatbuffers(args.flatc, args.schema, tmp)
            server = Proc([args.liveprof, "demo", "--port", "0", "--seconds", "60"], ready=[LISTENING], ready_s=20)
            asyncio.run(run_checks(server.port, fb))
            check(server.returncode is None, "liveprof exited during the test", exit_code=server.returncode,
                  output=output(server))
        except (CheckFailed, AssertionError) as e:  # (AssertionError: liveprof did not start)
            print("FAIL: " + str(e).replace("\n", " | "), flush=True)
            return 1
        except Exception as e:  # a refused connection, an HTTP error, a missing JSON member...
            print(f"FAIL: unexpected {type(e).__name__}: {e}"
                  + (f" (liveprof output: {output(server)})" if server else ""), flush=True)
            return 1
        finally:
            if server:
                server.kill()
    print(f"PASS in {time.monotonic() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
