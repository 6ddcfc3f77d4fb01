#!/usr/bin/env python3
"""A stand-in for the jfsops binary in the client's unit tests.

``fake_jfsops.py lance ...`` prints the JSON lines of $FAKE_LANCE_JSONL.
``fake_jfsops.py warmup META --mount MP --follow --ahead K --control SOCK``
speaks the pipeline's protocol: batches from stdin (JSON range lines with a
"batch" field, closed by {"batch": ID}), at most K batches beyond the
position (it stops reading stdin when the window is full), each batch
"ready" as soon as it is closed, ``done ID`` / ``status [ID]`` on the unix
socket. Every batch it reads is appended to $FAKE_LOG/stream.<pid> and its
argv to $FAKE_LOG/argv.<pid>.
"""
import json
import os
import signal
import socket
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from jfsops_warmup import _read_line  # noqa: E402  the client's own line reader


def lance():
    with open(os.environ["FAKE_LANCE_JSONL"]) as f:
        sys.stdout.write(f.read())
    return 0


def warmup(argv):
    log = os.environ.get("FAKE_LOG", ".")
    with open(os.path.join(log, "argv.%d" % os.getpid()), "w") as f:
        json.dump(argv, f)
    ahead = int(argv[argv.index("--ahead") + 1])
    ctl = argv[argv.index("--control") + 1]
    lock = threading.Condition()
    st = {"pos": -1, "batches": [], "eof": False, "ranges": {}}
    out = sys.stdout

    def emit(o):
        with lock:
            out.write(json.dumps(o) + "\n")
            out.flush()

    def in_window():
        return sum(1 for i, _ in enumerate(st["batches"]) if i > st["pos"])

    def reader():
        cur = []
        for line in sys.stdin:
            o = json.loads(line)
            if "file" in o:
                cur.append((o["file"], o["offset"], o["length"]))
                continue
            bid = str(o["batch"])
            with lock:
                while in_window() >= ahead:
                    lock.wait()
                # logged before the batch can be seen as admitted (status,
                # done): a test that kills the fake right after "done" must
                # find every batch it saw in the log
                with open(os.path.join(log, "stream.%d" % os.getpid()), "a") as f:
                    f.write(json.dumps({"batch": bid, "ranges": cur}) + "\n")
                st["batches"].append(bid)
                st["ranges"][bid] = cur
                idx = len(st["batches"]) - 1
            cur = []
            emit({"type": "admit", "batch": bid, "index": idx, "position_at_open": st["pos"]})
            emit({"type": "batch", "batch": bid, "index": idx, "ready": True})
        with lock:
            st["eof"] = True
            lock.notify_all()

    def answer(line):
        words = line.split(None, 1)
        with lock:
            if words and words[0] == "done" and len(words) == 2:
                bid = words[1]
                if bid in st["batches"]:
                    st["pos"] = max(st["pos"], st["batches"].index(bid))
                    lock.notify_all()
                    emit({"type": "done", "batch": bid, "index": st["pos"]})
                    return {"type": "done", "batch": bid, "ok": True, "position": st["pos"]}
                return {"type": "done", "batch": bid, "ok": True, "ahead_of_stream": True}
            if words and words[0] == "status":
                if len(words) == 1:
                    return {"type": "status", "position": st["pos"], "in_window": in_window()}
                bid = words[1]
                if bid in st["batches"]:
                    i = st["batches"].index(bid)
                    state = "done" if i <= st["pos"] else "ready"
                    return {"type": "status", "batch": bid, "state": state,
                            "ready": state == "ready", "index": i}
                return {"type": "status", "batch": bid, "state": "unknown", "ready": False}
        return {"type": "error", "error": "unknown command"}

    if os.path.exists(ctl):
        os.unlink(ctl)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(ctl)
    srv.listen(16)
    srv.settimeout(0.1)
    signal.signal(signal.SIGTERM, lambda *a: (os.unlink(ctl), os._exit(143)))
    threading.Thread(target=reader, daemon=True).start()
    while True:
        with lock:
            if st["eof"] and st["pos"] >= len(st["batches"]) - 1:
                break
        try:
            c, _ = srv.accept()
        except socket.timeout:
            continue
        with c:
            buf = _read_line(c)
            if buf.strip():
                c.sendall((json.dumps(answer(buf.decode().strip())) + "\n").encode())
    emit({"type": "summary", "batches": len(st["batches"]), "position": st["pos"]})
    os.unlink(ctl)
    return 0


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "lance":
        return lance()
    if len(sys.argv) > 1 and sys.argv[1] == "warmup":
        return warmup(sys.argv[1:])
    print("fake_jfsops: unknown command %r" % sys.argv[1:], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
