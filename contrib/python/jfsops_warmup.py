"""A data loader's client for ``jfsops warmup --follow`` (standard library only).

The pipeline keeps the next batches of a training loop warm in a JuiceFS
mount's cache: it reads a stream of batches (byte ranges of files), warms at
most ``ahead`` batches beyond the consumer's position, and learns the position
from ``done ID`` lines on its control socket. This module starts the pipeline,
publishes batches, reports ``done``, asks for readiness, and restarts a
pipeline that died from the consumer's position (it re-sends the batches the
consumer has not finished, in order).

    from jfsops_warmup import Pipeline, lance_ranges

    lr = lance_ranges("redis://10.0.0.5:6379/1:/ds", ["image", "label"])
    with Pipeline("redis://10.0.0.5:6379/1", "/mnt/jfs", "/run/train/warm.sock",
                  prefix="/ds", ahead=2, evict_done=True) as p:
        p.feed((str(i), lr.ranges_for([f])) for i, f in enumerate(files))
        for i, f in enumerate(files):
            p.wait_ready(str(i), timeout=30)      # or go ahead without waiting
            train_on(f)
            p.done(str(i))

A batch is a list of ranges: ``(path, offset, length)`` tuples (or
:class:`Range`), paths relative to ``prefix`` (or the volume root), ``length``
None for the whole file.
"""

import collections
import json
import os
import socket
import subprocess
import threading
import time

__all__ = ["Range", "LanceRanges", "lance_ranges", "Pipeline", "PipelineError"]

Range = collections.namedtuple("Range", "path offset length")


class PipelineError(RuntimeError):
    """The pipeline failed (and could not be restarted)."""


def _norm(r):
    if isinstance(r, Range):
        return r
    if isinstance(r, str):
        return Range(r, 0, None)
    path, off, ln = r
    return Range(path, int(off), None if ln is None else int(ln))


def range_lines(batch_id, ranges):
    """The stream lines of one batch: JSON range lines, then the closing line."""
    out = []
    for r in ranges:
        r = _norm(r)
        if "\n" in r.path:
            raise ValueError("a path with a newline: %r" % r.path)
        if r.length is None:
            # a bare path is the whole file; JSON needs a length: use the plain form
            out.append(json.dumps({"file": r.path, "offset": 0, "length": 1 << 62,
                                   "batch": batch_id}))
        else:
            out.append(json.dumps({"file": r.path, "offset": r.offset, "length": r.length,
                                   "batch": batch_id}))
    out.append(json.dumps({"batch": batch_id}))
    return "".join(line + "\n" for line in out)


class LanceRanges:
    """The ranges `jfsops lance` lists for a dataset version and columns.

    ``files`` maps each file (relative to the dataset) to its ranges;
    ``shared`` are the ranges every reader needs whatever it reads (the
    manifest, deletion files); ``data_files`` the data files in listing order.
    """

    def __init__(self, records):
        self.files = collections.OrderedDict()
        for o in records:
            if o.get("type", "range") != "range":
                continue
            self.files.setdefault(o["file"], []).append((int(o["offset"]), int(o["length"])))
        self.data_files = [f for f in self.files if f.startswith("data/")]
        self.shared = [Range(f, off, ln) for f in self.files if not f.startswith("data/")
                       for off, ln in self.files[f]]

    def ranges_for(self, data_files, prefix=""):
        """Ranges a scan of these data files reads ("data/x.lance" or "x.lance"),
        shared ones included; paths prefixed with prefix (e.g. "ds/")."""
        out = [Range(prefix + r.path, r.offset, r.length) for r in self.shared]
        for f in data_files:
            key = f if f in self.files else "data/" + f
            if key not in self.files:
                raise KeyError("no ranges for data file %r" % f)
            out.extend(Range(prefix + key, off, ln) for off, ln in self.files[key])
        return out


def lance_ranges(dataset, columns, jfsops="jfsops", version=None, extra_args=()):
    """Run ``jfsops lance DATASET --columns ... --format jsonl``.

    dataset is anything `jfsops lance` takes: a local directory,
    ``META-URL:/path`` inside a JuiceFS volume (no mount needed), or s3://.
    """
    cmd = [jfsops, "lance", dataset, "--columns", ",".join(columns), "--format", "jsonl", "-q"]
    if version is not None:
        cmd += ["--version", str(version)]
    cmd += list(extra_args)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise PipelineError("jfsops lance failed (exit %d): %s" % (p.returncode, p.stderr.strip()))
    return LanceRanges(json.loads(line) for line in p.stdout.splitlines() if line.strip())


def _read_line(s):
    """What socket s sends up to its first newline (or its end); bytes, the newline kept."""
    buf = b""
    while b"\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    return buf


def _ask(path, line, timeout=10.0):
    """One request on the control socket; the reply as a dict."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(path)
        s.sendall((line + "\n").encode())
        buf = _read_line(s)
    finally:
        s.close()
    if not buf.strip():
        raise ConnectionError("no answer on %s" % path)
    return json.loads(buf.split(b"\n", 1)[0])


class Pipeline:
    """A running ``jfsops warmup --follow`` and its control socket.

    Thread use: one thread may publish (or :meth:`feed` does it in the
    background) while another calls :meth:`done`, :meth:`status` and
    :meth:`wait_ready`.
    """

    def __init__(self, meta, mount, control, ahead=2, prefix=None, jfsops="jfsops",
                 evict_done=False, threads=None, evict_others=None, extra_args=(),
                 env=None, stderr=None, restart=True, max_restarts=3, start=True,
                 start_timeout=30.0):
        self.meta, self.mount, self.control = meta, mount, control
        self.ahead, self.prefix, self.jfsops = ahead, prefix, jfsops
        self.evict_done, self.threads, self.evict_others = evict_done, threads, evict_others
        self.extra_args, self.env, self.stderr = list(extra_args), env, stderr
        self.restart_allowed, self.max_restarts = restart, max_restarts
        self.start_timeout = start_timeout
        self.restarts = 0
        self.events = collections.deque(maxlen=10000)   # stdout JSON lines, newest last
        self.summary = None
        # _lock serialises writers of the stream (publish, restart), which may
        # block on a full pipe; _ulock guards _unfinished and is never held
        # while writing, so done() cannot wait behind a blocked writer
        self._lock = threading.RLock()
        self._ulock = threading.Lock()
        self._unfinished = collections.OrderedDict()  # id -> lines, published, not done
        self._ended = False                    # end_stream() was called
        self._proc = None
        self._reader = None
        self._feeder = None
        self._feed_error = None
        self._cond = threading.Condition()
        self._ready = set()
        if start:
            self.start()

    # -------------------------------------------------------------- process

    def command(self):
        cmd = [self.jfsops, "warmup", self.meta, "--mount", self.mount, "--follow",
               "--ahead", str(self.ahead), "--control", self.control]
        if self.prefix:
            cmd += ["--prefix", self.prefix]
        if self.evict_done:
            cmd.append("--evict-done")
        if self.evict_others:
            cmd += ["--evict-others", self.evict_others]
        if self.threads:
            cmd += ["--threads", str(self.threads)]
        return cmd + self.extra_args

    def start(self):
        with self._lock:
            self._proc = subprocess.Popen(self.command(), stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=self.stderr,
                                          env=self.env, text=True, bufsize=1)
            proc = self._proc
            self._reader = threading.Thread(target=self._read_events, args=(proc,),
                                            daemon=True)
            self._reader.start()
            deadline = time.time() + self.start_timeout
            while True:
                if proc.poll() is not None:
                    raise PipelineError("jfsops warmup --follow exited %d at start"
                                        % proc.returncode)
                try:
                    _ask(self.control, "status", timeout=2)
                    break
                except (OSError, ValueError):
                    if time.time() > deadline:
                        raise PipelineError("no control socket at %s" % self.control)
                    time.sleep(0.02)

    @property
    def pid(self):
        return self._proc.pid if self._proc else None

    def alive(self):
        return self._proc is not None and self._proc.poll() is None

    def _read_events(self, proc):
        for line in proc.stdout:
            try:
                o = json.loads(line)
            except ValueError:
                continue
            self.events.append(o)
            t = o.get("type")
            with self._cond:
                if t == "batch":
                    self._ready.add(o.get("batch"))
                elif t in ("unready", "done"):
                    self._ready.discard(o.get("batch"))
                elif t == "summary":
                    self.summary = o
                self._cond.notify_all()

    def restart(self):
        """Start a new pipeline and re-send the batches the consumer has not
        finished (the consumer's position is where the new one starts)."""
        with self._lock:
            if self.restarts >= self.max_restarts:
                raise PipelineError("the pipeline died %d times" % (self.restarts + 1))
            self.restarts += 1
            old, old_reader = self._proc, self._reader
            if old is not None and old.poll() is None:
                old.kill()
            if old is not None:
                old.wait()
                self._close_pipes(old, old_reader)
            with self._cond:
                self._ready.clear()
            self.start()
            with self._ulock:
                todo = list(self._unfinished.values())
            for lines in todo:
                self._write(lines)
            if self._ended:
                self._proc.stdin.close()

    @staticmethod
    def _close_pipes(proc, reader):
        if reader is not None:
            reader.join(5)
        for f in (proc.stdin, proc.stdout):
            try:
                f.close()
            except (OSError, ValueError):
                pass

    def _ensure_running(self):
        with self._lock:
            self._ensure_running_locked()

    def _ensure_running_locked(self):
        if self.alive():
            return
        if not self.restart_allowed:
            raise PipelineError("the pipeline exited %s" % (self._proc.returncode
                                                            if self._proc else "?"))
        self.restart()

    # --------------------------------------------------------------- stream

    def _write(self, text):
        self._proc.stdin.write(text)
        self._proc.stdin.flush()

    def publish(self, batch_id, ranges):
        """Append one batch to the stream. Blocks while the pipeline's window
        is full and the pipe is too (that is the back-pressure)."""
        batch_id = str(batch_id)
        lines = range_lines(batch_id, ranges)
        with self._lock:
            if self._ended:
                raise PipelineError("the stream was ended")
            with self._ulock:
                self._unfinished[batch_id] = lines
            try:
                self._write(lines)
            except (BrokenPipeError, ValueError, OSError):
                if self.alive():
                    raise PipelineError("cannot write to the pipeline")
                # the batch is in _unfinished: restart() re-sends it
                self._ensure_running()

    def feed(self, batches, end=True):
        """Publish (id, ranges) pairs from an iterable in a background thread;
        end the stream after the last one unless end is False."""
        def run():
            try:
                for bid, ranges in batches:
                    self.publish(bid, ranges)
                if end:
                    self.end_stream()
            except Exception as e:  # noqa: BLE001 - reported by wait_ready/done
                self._feed_error = e
        self._feeder = threading.Thread(target=run, daemon=True)
        self._feeder.start()
        return self._feeder

    def end_stream(self):
        """No more batches: the pipeline exits once the consumer passed the last."""
        with self._lock:
            self._ended = True
            try:
                self._proc.stdin.close()
            except OSError:
                pass

    # -------------------------------------------------------------- control

    def _call(self, line):
        for attempt in range(self.max_restarts + 2):
            try:
                return _ask(self.control, line)
            except (OSError, ValueError):
                if self.alive():
                    if attempt < 2:
                        time.sleep(0.05)
                        continue
                    raise
                self._ensure_running()
        raise PipelineError("no answer to %r" % line)

    def done(self, batch_id):
        """The consumer finished batch_id (and every batch before it)."""
        batch_id = str(batch_id)
        r = self._call("done " + batch_id)
        if r.get("ok"):
            with self._ulock:
                while batch_id in self._unfinished:
                    k = next(iter(self._unfinished))
                    del self._unfinished[k]
                    if k == batch_id:
                        break
        return r

    def status(self, batch_id=None):
        """The pipeline's answer: a batch's state, or the window's."""
        return self._call("status" if batch_id is None else "status " + str(batch_id))

    def ready(self, batch_id):
        return bool(self.status(batch_id).get("ready"))

    def wait_ready(self, batch_id, timeout=None, poll=0.01):
        """Wait until batch_id is warm (True) or timeout seconds passed (False)."""
        batch_id = str(batch_id)
        deadline = None if timeout is None else time.time() + timeout
        while True:
            if self._feed_error is not None:
                raise PipelineError("publishing failed: %s" % self._feed_error)
            if self.ready(batch_id):
                return True
            if deadline is not None and time.time() >= deadline:
                return False
            with self._cond:
                self._cond.wait(poll)

    # ----------------------------------------------------------------- end

    def close(self, timeout=30.0):
        """End the stream and wait for the pipeline; terminate it after timeout."""
        if self._proc is None:
            return None
        self.end_stream()
        if self._feeder is not None:
            self._feeder.join(timeout)
        try:
            rc = self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._proc.terminate()
            rc = self._proc.wait()
        self._close_pipes(self._proc, self._reader)
        return rc

    def terminate(self):
        """Stop now (SIGTERM: the pipeline prints its summary and exits 143)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            self._proc.wait()
        if self._proc is not None:
            self._close_pipes(self._proc, self._reader)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.terminate()
        return False
