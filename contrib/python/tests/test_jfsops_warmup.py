"""Unit tests of the contrib/python client (standard library only).

They run the client against tests/fake_jfsops.py, which speaks the
pipeline's stream and control protocol; the real binary is exercised by
tests/integration/warmup_follow.sh (a real mount, pylance, the example).
Run: python3 -m unittest discover -s contrib/python/tests
"""
import glob
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))

import jfsops_warmup as jw  # noqa: E402
from lance_sampler import FragmentBatchSampler  # noqa: E402  (no pylance needed)

FAKE = os.path.join(HERE, "fake_jfsops.py")


class ClientTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="jo-pyclient.")
        os.environ["FAKE_LOG"] = self.dir
        self.sock = os.path.join(self.dir, "ctl.sock")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def pipeline(self, **kw):
        return jw.Pipeline("redis://h:1/1", "/mnt/x", self.sock, jfsops=FAKE, **kw)

    def streams(self):
        """The batches each fake pipeline read, per process, in start order."""
        out = []
        for p in sorted(glob.glob(os.path.join(self.dir, "stream.*")), key=os.path.getmtime):
            with open(p) as f:
                out.append([json.loads(line) for line in f])
        return out

    def test_stream_lines_are_json_ranges_closed_by_the_batch(self):
        text = jw.range_lines("b7", [("a/x.lance", 0, 10), jw.Range("y", 5, 1), "whole"])
        lines = [json.loads(line) for line in text.splitlines()]
        self.assertEqual(lines[0], {"file": "a/x.lance", "offset": 0, "length": 10, "batch": "b7"})
        self.assertEqual(lines[1]["file"], "y")
        self.assertEqual(lines[2]["offset"], 0)
        self.assertGreater(lines[2]["length"], 1 << 40)  # the whole file
        self.assertEqual(lines[-1], {"batch": "b7"})
        with self.assertRaises(ValueError):
            jw.range_lines("b", [("bad\npath", 0, 1)])

    def test_command_line_carries_the_options(self):
        p = self.pipeline(ahead=3, prefix="/ds", evict_done=True, threads=4, start=False)
        cmd = p.command()
        self.assertEqual(cmd[:3], [FAKE, "warmup", "redis://h:1/1"])
        for pair in (["--ahead", "3"], ["--prefix", "/ds"], ["--threads", "4"],
                     ["--control", self.sock], ["--mount", "/mnt/x"]):
            i = cmd.index(pair[0])
            self.assertEqual(cmd[i:i + 2], pair)
        self.assertIn("--follow", cmd)
        self.assertIn("--evict-done", cmd)

    def test_publish_wait_done_and_status(self):
        with self.pipeline(ahead=2) as p:
            p.publish("0", [("f", 0, 1)])
            p.publish("1", [("f", 4096, 1), ("g", 0, 2)])
            self.assertTrue(p.wait_ready("0", timeout=10))
            self.assertTrue(p.wait_ready("1", timeout=10))
            self.assertEqual(p.status("1")["state"], "ready")
            self.assertEqual(p.status("nope")["state"], "unknown")
            self.assertFalse(p.wait_ready("nope", timeout=0.1))
            self.assertTrue(p.done("0")["ok"])
            self.assertEqual(p.status("0")["state"], "done")
            self.assertEqual(p.status()["position"], 0)
            p.done("1")
        self.assertEqual(p.summary["batches"], 2)
        (s,) = self.streams()
        self.assertEqual([b["batch"] for b in s], ["0", "1"])
        self.assertEqual(s[1]["ranges"], [["f", 4096, 1], ["g", 0, 2]])

    def test_feed_is_held_back_by_the_window(self):
        batches = [(str(i), [("f", i * 10, 1)]) for i in range(6)]
        with self.pipeline(ahead=2) as p:
            p.feed(iter(batches))
            self.assertTrue(p.wait_ready("1", timeout=10))
            time.sleep(0.3)
            # the pipeline read no further than its window
            self.assertEqual(p.status("2")["state"], "unknown")
            for i in range(6):
                self.assertTrue(p.wait_ready(str(i), timeout=10))
                p.done(str(i))
        self.assertEqual([b["batch"] for b in self.streams()[0]], [str(i) for i in range(6)])

    def test_a_killed_pipeline_restarts_from_the_consumers_position(self):
        batches = [(str(i), [("f", i, 1)]) for i in range(6)]
        with self.pipeline(ahead=2) as p:
            p.feed(iter(batches))
            for i in range(2):
                self.assertTrue(p.wait_ready(str(i), timeout=10))
                p.done(str(i))
            first = p.pid
            os.kill(first, signal.SIGKILL)
            p._proc.wait()
            # the consumer goes on: the next call starts a new pipeline
            self.assertTrue(p.wait_ready("2", timeout=10))
            self.assertNotEqual(p.pid, first)
            self.assertEqual(p.restarts, 1)
            for i in range(2, 6):
                self.assertTrue(p.wait_ready(str(i), timeout=10))
                p.done(str(i))
        old, new = self.streams()
        self.assertEqual([b["batch"] for b in old][:2], ["0", "1"])
        # the new one starts at the batch the consumer was on, and reads none it finished
        self.assertEqual([b["batch"] for b in new], ["2", "3", "4", "5"])

    def test_no_restart_when_not_allowed(self):
        p = self.pipeline(restart=False)
        try:
            os.kill(p.pid, signal.SIGKILL)
            p._proc.wait()
            with self.assertRaises(jw.PipelineError):
                p.done("0")
        finally:
            p.terminate()

    def test_lance_ranges_group_files_and_share_the_manifest(self):
        recs = [
            {"type": "range", "file": "_versions/3.manifest", "offset": 0, "length": 900,
             "kind": "meta"},
            {"type": "range", "file": "data/a.lance", "offset": 0, "length": 100, "kind": "data"},
            {"type": "range", "file": "data/a.lance", "offset": 500, "length": 64, "kind": "meta"},
            {"type": "range", "file": "data/b.lance", "offset": 8, "length": 16, "kind": "data"},
            {"type": "range", "file": "_deletions/1-2-3.arrow", "offset": 0, "length": 40,
             "kind": "meta"},
            {"type": "summary", "ranges": 5},
        ]
        path = os.path.join(self.dir, "lance.jsonl")
        with open(path, "w") as f:
            for r in recs:
                f.write(json.dumps(r) + "\n")
        os.environ["FAKE_LANCE_JSONL"] = path
        lr = jw.lance_ranges("redis://h:1/1:/ds", ["id", "emb"], jfsops=FAKE)
        self.assertEqual(lr.data_files, ["data/a.lance", "data/b.lance"])
        self.assertEqual(len(lr.shared), 2)
        got = lr.ranges_for(["b.lance"], prefix="ds/")
        self.assertEqual(got, [jw.Range("ds/_versions/3.manifest", 0, 900),
                               jw.Range("ds/_deletions/1-2-3.arrow", 0, 40),
                               jw.Range("ds/data/b.lance", 8, 16)])
        self.assertEqual(len(lr.ranges_for(["data/a.lance"])), 4)
        with self.assertRaises(KeyError):
            lr.ranges_for(["c.lance"])

    def test_lance_failure_is_reported(self):
        os.environ["FAKE_LANCE_JSONL"] = os.path.join(self.dir, "missing")
        with self.assertRaises(jw.PipelineError):
            jw.lance_ranges("x", ["id"], jfsops=FAKE)


class SamplerTest(unittest.TestCase):
    def test_batches_like_a_torch_batch_sampler(self):
        s = FragmentBatchSampler(range(7), fragments_per_batch=3)
        self.assertEqual(list(s), [[0, 1, 2], [3, 4, 5], [6]])
        self.assertEqual(len(s), 3)
        s = FragmentBatchSampler(range(7), fragments_per_batch=3, drop_last=True)
        self.assertEqual(list(s), [[0, 1, 2], [3, 4, 5]])
        self.assertEqual(len(s), 2)

    def test_shuffle_is_per_epoch_and_reproducible(self):
        a = FragmentBatchSampler(range(20), 2, shuffle=True, seed=5)
        b = FragmentBatchSampler(range(20), 2, shuffle=True, seed=5)
        self.assertEqual(list(a), list(b))
        first = list(a)
        a.set_epoch(1)
        self.assertNotEqual(list(a), first)
        self.assertEqual(sorted(x for bt in a for x in bt), list(range(20)))

    def test_the_example_needs_no_torch(self):
        import lance_sampler
        with open(lance_sampler.__file__) as f:
            src = f.read()
        self.assertNotIn("import torch", src)


if __name__ == "__main__":
    unittest.main()
