"""Processes for the Python tests: `Proc` starts a command (a `liveprof`
command, a nats-server), keeps its output and waits for lines of it (the
dashboard's URL, a job's end), and stops it; `Server` is `liveprof serve
--port 0 --ingest unix:...` on top of it, its REST views fetched. Shared by
tests/python, tests/attach, tests/ingest, tests/web and tests/fleet (which
put tests/python on sys.path)."""

import json
import os
import re
import shlex
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request

START_DEADLINE_S = 30
# The line a liveprof command prints once its web server listens.
LISTENING = r"listening on (http://127\.0\.0\.1:(\d+))/"


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


class Proc:
    """A child process, stdout and stderr merged, read line by line on a
    daemon thread into `log` (the lines, without their newline).

    `wait_for(regex)` searches the whole output from its first line, each
    call anew (a line may answer several calls; the order of the calls
    does not matter), and waits for more while none matches. With `ready`
    (regexes), the constructor waits for each, `ready_s` in all, and kills
    the process if one does not come. A context manager: stop() on exit."""

    def __init__(self, argv, env=None, cwd=None, name=None, start_new_session=False, ready=(),
                 ready_s=START_DEADLINE_S):
        self.argv = [str(a) for a in argv]
        self.name = name or shlex.join(self.argv)[:300]
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env=env, cwd=cwd, start_new_session=start_new_session)
        self.log = []
        self._url = None
        self._session = start_new_session
        self._eof = False
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + ready_s
        try:
            for regex in ready:
                self.wait_for(regex, deadline - time.monotonic())
        except BaseException:
            self.kill()
            raise

    def _read(self):
        for line in self.proc.stdout:
            with self._changed:
                self.log.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._eof = True
            self._changed.notify_all()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def tail(self, lines=60):
        return "\n".join(self.log[-lines:])

    def wait_for(self, regex, timeout_s=60):
        """The re.Match of the first line of the output (from its start)
        where `regex` is found (re.search), waiting up to timeout_s for it;
        AssertionError if it does not come in time or the output ends (the
        process exited) without it."""
        pattern = re.compile(regex)
        deadline = time.monotonic() + timeout_s
        seen = 0
        with self._changed:
            while True:
                for line in self.log[seen:]:
                    m = pattern.search(line)
                    if m:
                        return m
                seen = len(self.log)
                if self._eof:
                    try:
                        status = "status %s" % self.proc.wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        status = "its output closed, still running"
                    fail("%s: ended (%s) with no line matching %r; its output's last lines:\n%s"
                         % (self.name, status, pattern.pattern, self.tail()))
                left = deadline - time.monotonic()
                if left <= 0:
                    fail("%s: no line matching %r within %.3g s (%s); its output's last lines:\n%s"
                         % (self.name, pattern.pattern, timeout_s,
                            "running" if self.proc.poll() is None else "exited, status %s" % self.proc.returncode,
                            self.tail()))
                self._changed.wait(left)

    def wait_url(self, timeout_s=START_DEADLINE_S):
        """The dashboard's URL, http://127.0.0.1:PORT, once its LISTENING
        line comes."""
        return self.wait_for(LISTENING, timeout_s).group(1)

    @property
    def url(self):
        """The URL of the LISTENING line printed so far, or None."""
        if self._url is None:
            m = next((m for m in map(re.compile(LISTENING).search, list(self.log)) if m), None)
            self._url = m.group(1) if m else None
        return self._url

    @property
    def port(self):
        url = self.url
        return int(url.rsplit(":", 1)[1]) if url else None

    def get(self, path, retry_s=30):
        """GET the URL + path as JSON (a 503, no snapshot published yet,
        retried for up to retry_s)."""
        return get_json(self.url + path, retry_s=retry_s)

    @property
    def returncode(self):
        """The exit status, or None while it runs."""
        return self.proc.poll()

    def wait(self, timeout=60):
        """The exit status; AssertionError (the process killed) if it does
        not exit within timeout."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            fail("%s: did not exit in %.3g s; its output's last lines:\n%s" % (self.name, timeout, self.tail()))

    def stop(self, timeout=10, sig=signal.SIGTERM):
        """`sig` (SIGTERM), then SIGKILL after timeout; the exit status, with
        all its output read (its reader given 5 s more)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self._reader.join(timeout=5)
        return self.proc.returncode

    def kill(self):
        """SIGKILL to the process (its whole session where it was started in
        a new one), if it runs."""
        if self.proc.poll() is None:
            try:
                if self._session:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                else:
                    self.proc.kill()
            except ProcessLookupError:
                pass
        self.proc.wait()


class Server(Proc):
    """`liveprof serve --port 0 --ingest unix:TMP/ingest.sock` and `extra`
    arguments; or, with `command` (e.g. ["open", DIR]), `liveprof COMMAND
    --port 0` and no ingest. Started: its URL (`url`) and, for serve, its
    ingest socket (`sock`) listen."""

    def __init__(self, binary, tmp, extra=(), command=None):
        self.sock = os.path.join(tmp, "ingest.sock")
        args = [binary, "serve", "--port", "0", "--ingest", "unix:" + self.sock] if command is None else \
            [binary] + list(command) + ["--port", "0"]
        super().__init__(args + list(extra), name="liveprof " + (command or ["serve"])[0],
                         ready=[LISTENING] + ([r"^ingest on unix:"] if command is None else []))

    def get(self, path):
        return get_json(self.url + path)
