"""`liveprof serve --port 0 --ingest unix:...` for the Python tests: started,
its URL and ingest socket read from its output, its REST views fetched,
stopped. Shared by tests/python and tests/attach."""

import json
import os
import queue
import re
import subprocess
import threading
import time
import urllib.error
import urllib.request

START_DEADLINE_S = 30


def fail(msg):
    raise AssertionError(msg)


def get_json(url, retry_s=10):
    """GET url as JSON; a 503 (no snapshot published yet, just after the
    start: "retry in a moment") is retried for up to retry_s."""
    deadline = time.monotonic() + retry_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            if e.code != 503 or time.monotonic() > deadline:
                raise
        time.sleep(0.05)


def get_metrics(url, retry_s=10):
    """GET url + /metrics as text (a 503 retried as get_json does), checked
    by Debian's promtool (`check metrics`: exit 0, no lint problem)."""
    deadline = time.monotonic() + retry_s
    while True:
        try:
            with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
                text = r.read().decode()
            break
        except urllib.error.HTTPError as e:
            if e.code != 503 or time.monotonic() > deadline:
                raise
        time.sleep(0.05)
    check = subprocess.run(["/usr/bin/promtool", "check", "metrics"], input=text, capture_output=True, text=True,
                           timeout=30)
    if check.returncode != 0 or check.stdout.strip() or check.stderr.strip():
        fail("promtool check metrics on %s: %s%s\n%s" % (url, check.stdout, check.stderr, text[:2000]))
    return text


class Server:
    """`liveprof serve --port 0 --ingest unix:TMP/ingest.sock` and `extra`
    arguments; or, with `command` (e.g. ["open", DIR]), `liveprof COMMAND
    --port 0` and no ingest."""

    def __init__(self, binary, tmp, extra=(), command=None):
        self.sock = os.path.join(tmp, "ingest.sock")
        args = [binary, "serve", "--port", "0", "--ingest", "unix:" + self.sock] if command is None else \
            [binary] + list(command) + ["--port", "0"]
        self.proc = subprocess.Popen(args + list(extra), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines = queue.Queue()
        self.log = []
        threading.Thread(target=self._read, daemon=True).start()
        self.url = None
        deadline = time.monotonic() + START_DEADLINE_S
        ingest = command is not None
        while self.url is None or not ingest:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                fail("liveprof serve did not start:\n" + "\n".join(self.log))
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            m = re.search(r"listening on (http://127\.0\.0\.1:\d+)/", line)
            if m:
                self.url = m.group(1)
            if line.startswith("ingest on unix:"):
                ingest = True

    def _read(self):
        for line in self.proc.stdout:
            self.log.append(line.rstrip())
            self.lines.put(line)

    def get(self, path):
        return get_json(self.url + path)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
