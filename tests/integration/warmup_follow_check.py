#!/usr/bin/env python3
"""Checks for warmup_follow.sh (each prints what it found; exit 1 on a failure).

  hits BATCHES.jsonl FROM          the consumer's reads of batch N >= FROM came from
                                   the cache: in the mount's own counters (.stats)
                                   the missed bytes during the read are the one
                                   byte per block the pipeline reads, give or take
                                   the reads in flight when the counters were
                                   taken (miss_bytes - misses <= 64; a read of the
                                   consumer that misses is pages of a file or its
                                   tail, hundreds of bytes at least), and the
                                   consumer's bytes were cache hits
  window EVENTS.jsonl K            no batch was admitted more than K beyond the
                                   consumer's position, replaying the pipeline's
                                   own admit/done lines; also per incarnation
  bound PLAN.jsonl JFSOPS META PREFIX K OUT
                                   the most bytes K consecutive batches need
                                   (distinct blocks, from `jfsops warmup --dry-run`
                                   of each batch), and their block count, to OUT
  restart EVENTS.jsonl             the second incarnation of the pipeline started at
                                   the consumer's position: its first batch is the
                                   last one the first incarnation saw done, or the
                                   next, and it never admitted an earlier one
  blocks PLAN.jsonl BATCH ...      the ranges of some batches as "PATH OFF LEN" lines
                                   (data files only with --data-only first)
"""
import json
import subprocess
import sys


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def die(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def close_and_log(p, timeout, path):
    """For a consumer script: close the pipeline p (waiting up to timeout
    seconds), write its events to path as JSON lines; the exit code."""
    rc = p.close(timeout)
    with open(path, "w") as f:
        for e in p.events:
            f.write(json.dumps(e) + "\n")
    return rc


def hits(path, first):
    recs = [r for r in load(path) if "batch" in r and r.get("type") != "summary"]
    if not recs:
        die("no batches in %s" % path)
    bad = []
    for r in recs:
        n = int(r["batch"])
        if n < first:
            continue
        if r["miss_bytes"] - r["misses"] > 64 or r["hit_bytes"] < 4096 or r["rows"] <= 0:
            bad.append(r)
    first_batches = [(r["batch"], r["miss_bytes"] - r["misses"]) for r in recs if int(r["batch"]) < first]
    print("hits: %d batches read, from batch %d on every read came from the cache (%s); "
          "consumer miss bytes of the first batches: %s" % (
              len(recs), first, "no" if bad else "yes", first_batches))
    if bad:
        die("batches read with cache misses: %s" % json.dumps(bad[:5]))


def replay(events, k, name):
    pos, admitted, most = -1, [], 0
    for e in events:
        t = e.get("type")
        if t == "admit":
            if e["index"] - e["position_at_open"] > k:
                die("%s: batch %s admitted %d beyond the position (window %d)"
                    % (name, e["batch"], e["index"] - e["position_at_open"], k))
            # a done may come while a batch is being read: its admit line
            # (printed when it closes) then follows that done line
            if e["position_at_open"] > pos:
                die("%s: admit of %s says position %d, the done lines say %d"
                    % (name, e["batch"], e["position_at_open"], pos))
            admitted.append(e["index"])
            most = max(most, len([i for i in admitted if i > pos]))
        elif t == "done":
            pos = max(pos, e["index"])
        elif t == "summary" and e.get("max_ahead", 0) > k:
            die("%s: summary max_ahead %d > %d" % (name, e["max_ahead"], k))
    if most > k:
        die("%s: %d batches in the window at once (window %d)" % (name, most, k))
    return most, len(admitted)


def incarnations(events):
    """Split the pipeline's lines where the index starts again (a restart)."""
    runs, cur = [], []
    for e in events:
        if e.get("type") == "admit" and e["index"] == 0 and any(
                x.get("type") == "admit" for x in cur):
            runs.append(cur)
            cur = []
        cur.append(e)
    runs.append(cur)
    return runs


def window(path, k):
    runs = incarnations(load(path))
    for i, run in enumerate(runs):
        most, n = replay(run, k, "run %d" % (i + 1))
        print("window: run %d admitted %d batches, at most %d in the window (K=%d)"
              % (i + 1, n, most, k))


def restart(path):
    runs = incarnations(load(path))
    if len(runs) != 2:
        die("expected two runs of the pipeline, found %d" % len(runs))
    first, second = runs
    dones = [int(e["batch"]) for e in first if e.get("type") == "done"]
    last = max(dones) if dones else -1
    adm = [int(e["batch"]) for e in second if e.get("type") == "admit"]
    if not adm:
        die("the restarted pipeline admitted nothing")
    print("restart: the killed run saw done up to batch %d; the new run started at batch %d "
          "and admitted %s" % (last, adm[0], adm[:6]))
    if adm[0] not in (last, last + 1):
        die("the new run started at batch %d, not at the consumer's position (%d or %d)"
            % (adm[0], last, last + 1))
    if min(adm) < last:
        die("the new run admitted batch %d, which the consumer had passed" % min(adm))


def batch_lines(plan, ids, data_only):
    out = []
    for b in plan:
        if b["batch"] in ids:
            for p, o, n in b["ranges"]:
                if data_only and not p.startswith("data/"):
                    continue
                out.append("%s %d %d" % (p, o, n))
    return out


def bound(plan_path, jfsops, meta, prefix, k, out):
    plan = load(plan_path)
    blocks = []
    for b in plan:
        text = "\n".join(batch_lines(plan, {b["batch"]}, False)) + "\n"
        p = subprocess.run([jfsops, "warmup", meta, "--prefix", prefix, "--dry-run", "--json"],
                           input=text, capture_output=True, text=True)
        if p.returncode:
            die("dry run of batch %s: %s" % (b["batch"], p.stderr))
        blocks.append({o["key"]: o["size"] for o in map(json.loads, p.stdout.splitlines())
                       if o.get("type") == "block"})
    best, nb = 0, 0
    for i in range(len(blocks)):
        u = {}
        for b in blocks[i:i + k]:
            u.update(b)
        if sum(u.values()) > best:
            best, nb = sum(u.values()), len(u)
    with open(out, "w") as f:
        f.write("%d %d %d\n" % (best, nb, sum(len(b) for b in blocks)))
    print("bound: %d consecutive batches need at most %d bytes (%d blocks); %d block reads "
          "in all batches" % (k, best, nb, sum(len(b) for b in blocks)))


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "hits":
        hits(args[0], int(args[1]))
    elif cmd == "window":
        window(args[0], int(args[1]))
    elif cmd == "restart":
        restart(args[0])
    elif cmd == "bound":
        bound(args[0], args[1], args[2], args[3], int(args[4]), args[5])
    elif cmd == "blocks":
        data_only = args[0] == "--data-only"
        if data_only:
            args = args[1:]
        print("\n".join(batch_lines(load(args[0]), set(args[1:]), data_only)))
    else:
        die("unknown check %r" % cmd)


if __name__ == "__main__":
    main()
