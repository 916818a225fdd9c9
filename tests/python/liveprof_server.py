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
import urllib.request

START_DEADLINE_S = 30


def fail(msg):
    raise AssertionError(msg)


class Server:
    def __init__(self, binary, tmp):
        self.sock = os.path.join(tmp, "ingest.sock")
        self.proc = subprocess.Popen(
            [binary, "serve", "--port", "0", "--ingest", "unix:" + self.sock],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines = queue.Queue()
        self.log = []
        threading.Thread(target=self._read, daemon=True).start()
        self.url = None
        deadline = time.monotonic() + START_DEADLINE_S
        ingest = False
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
        with urllib.request.urlopen(self.url + path, timeout=10) as r:
            return json.loads(r.read())

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
