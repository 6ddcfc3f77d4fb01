#!/usr/bin/env python3
"""A PyTorch-style sampler loop over a pylance dataset on a JuiceFS mount,
with ``jfsops warmup --follow`` keeping the next batches in the mount's cache.

Nothing here needs torch. :class:`FragmentBatchSampler` has the shape of a
``torch.utils.data.Sampler`` used as a ``batch_sampler`` (``__iter__`` yields
one batch, a list of fragment ids; ``__len__``; ``set_epoch``), so

    loader = torch.utils.data.DataLoader(dataset, batch_sampler=sampler, ...)

works the same way; this script runs the loop by hand: for each batch it
waits (optionally) until the pipeline says the batch is warm, reads it with
pylance, "trains" for --pace seconds, and reports ``done``.

    python3 lance_sampler.py --meta redis://10.0.0.5:6379/1 --mount /mnt/jfs \\
        --dataset /ds --columns id,emb --ahead 2 --evict-done --wait

One JSON line per batch goes to --out (default stdout): rows, the mount's
block-cache hit and miss bytes during the read (``.stats``), how long it
waited, whether the batch was ready when the read started; then a summary.
"""
import argparse
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from jfsops_warmup import Pipeline, lance_ranges  # noqa: E402


class FragmentBatchSampler:
    """Batches of fragment ids, shaped like a torch batch sampler."""

    def __init__(self, fragment_ids, fragments_per_batch=1, shuffle=False, seed=0,
                 drop_last=False):
        if fragments_per_batch < 1:
            raise ValueError("fragments_per_batch must be at least 1")
        self.ids = list(fragment_ids)
        self.per_batch = fragments_per_batch
        self.shuffle, self.seed, self.drop_last = shuffle, seed, drop_last
        self.epoch = 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        order = list(self.ids)
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(order)
        for i in range(0, len(order), self.per_batch):
            b = order[i:i + self.per_batch]
            if len(b) < self.per_batch and self.drop_last:
                return
            yield b

    def __len__(self):
        n, r = divmod(len(self.ids), self.per_batch)
        return n if self.drop_last or not r else n + 1


def mount_counters(mount):
    """Block-cache and object counters of a JuiceFS mount (its .stats file)."""
    want = {
        "juicefs_blockcache_hit_bytes": "hit_bytes",
        "juicefs_blockcache_miss_bytes": "miss_bytes",
        "juicefs_blockcache_hits": "hits",
        "juicefs_blockcache_miss": "misses",
        "juicefs_blockcache_bytes": "cache_bytes",
        "juicefs_object_request_durations_histogram_seconds_GET_total": "gets",
        "juicefs_object_request_data_bytes_GET": "get_bytes",
    }
    c = dict.fromkeys(want.values(), 0)
    path = os.path.join(mount, ".stats")
    if not os.path.exists(path):
        path = os.path.join(mount, ".jfs.stats")
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2 and parts[0] in want:
                c[want[parts[0]]] += int(float(parts[1]))
    return c


def plan_batches(sampler, fragments, ranges):
    """[(batch id, ranges, fragment ids)] for one pass of the sampler."""
    plan = []
    for i, frag_ids in enumerate(sampler):
        files = [("data/" + df.path) for f in frag_ids for df in fragments[f].data_files()]
        plan.append((str(i), ranges.ranges_for(files), frag_ids))
    return plan


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--meta", required=True, help="the volume's META-URL")
    ap.add_argument("--mount", required=True, help="a JuiceFS mount of the volume")
    ap.add_argument("--dataset", required=True, help="the dataset's path in the volume (/ds)")
    ap.add_argument("--columns", required=True, help="comma-separated columns to read")
    ap.add_argument("--jfsops", default="jfsops")
    ap.add_argument("--control", default=None, help="control socket (default: a temp path)")
    ap.add_argument("--ahead", type=int, default=2)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--evict-done", action="store_true")
    ap.add_argument("--wait", action="store_true", help="wait until a batch is warm")
    ap.add_argument("--wait-timeout", type=float, default=60.0)
    ap.add_argument("--pace", type=float, default=0.0, help="seconds of 'training' per batch")
    ap.add_argument("--fragments-per-batch", type=int, default=1)
    ap.add_argument("--shuffle", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit", type=int, default=0, help="stop after N batches")
    ap.add_argument("--no-warmup", action="store_true", help="no pipeline (a baseline)")
    ap.add_argument("--pid-file", default=None, help="keep the pipeline's pid here")
    ap.add_argument("--events", default=None, help="append the pipeline's JSON lines here")
    ap.add_argument("--out", default=None, help="per-batch JSON lines (default stdout)")
    ap.add_argument("--plan-out", default=None,
                    help="write each batch's ranges here (JSON lines) before the loop")
    a = ap.parse_args(argv)

    import lance  # pylance; only the loop needs it

    cols = [c for c in a.columns.split(",") if c]
    ds = lance.dataset(os.path.join(a.mount, a.dataset.lstrip("/")))
    fragments = {f.fragment_id: f for f in ds.get_fragments()}
    sampler = FragmentBatchSampler(sorted(fragments), a.fragments_per_batch, a.shuffle, a.seed)
    ranges = lance_ranges("%s:%s" % (a.meta, a.dataset), cols, jfsops=a.jfsops)
    plan = plan_batches(sampler, fragments, ranges)
    if a.limit:
        plan = plan[:a.limit]
    if a.plan_out:
        with open(a.plan_out, "w") as f:
            for bid, rs, frag_ids in plan:
                f.write(json.dumps({"batch": bid, "fragments": frag_ids,
                                    "ranges": [list(r) for r in rs]}) + "\n")
    out = open(a.out, "a") if a.out else sys.stdout
    control = a.control or "/tmp/jfsops-warm-%d.sock" % os.getpid()
    p = None
    if not a.no_warmup:
        p = Pipeline(a.meta, a.mount, control, ahead=a.ahead, prefix=a.dataset,
                     jfsops=a.jfsops, evict_done=a.evict_done, threads=a.threads)
        p.feed((bid, rs) for bid, rs, _ in plan)
    pid = None
    t0 = time.time()
    first = None
    peak = 0
    try:
        for bid, _, frag_ids in plan:
            if p is not None and p.pid != pid:
                pid = p.pid
                if a.pid_file:
                    with open(a.pid_file + ".tmp", "w") as f:
                        f.write("%d\n" % pid)
                    os.replace(a.pid_file + ".tmp", a.pid_file)
            waited, ready = 0.0, None
            if p is not None:
                if a.wait:
                    w0 = time.time()
                    ready = p.wait_ready(bid, a.wait_timeout)
                    waited = time.time() - w0
                else:
                    ready = p.ready(bid)
            c0 = mount_counters(a.mount)
            tbl = ds.scanner(columns=cols, fragments=[fragments[f] for f in frag_ids]).to_table()
            c1 = mount_counters(a.mount)
            if first is None:
                first = time.time() - t0
            peak = max(peak, c0["cache_bytes"], c1["cache_bytes"])
            rec = {"batch": bid, "fragments": frag_ids, "rows": tbl.num_rows,
                   "ready": ready, "waited": round(waited, 4), "t": round(time.time() - t0, 4)}
            for k in ("hit_bytes", "miss_bytes", "hits", "misses", "gets", "get_bytes"):
                rec[k] = c1[k] - c0[k]
            rec["cache_bytes"] = c1["cache_bytes"]
            out.write(json.dumps(rec) + "\n")
            out.flush()
            if a.pace:
                time.sleep(a.pace)
            if p is not None:
                p.done(bid)
        rc = p.close() if p is not None else 0
    except BaseException:
        if p is not None:
            p.terminate()
        raise
    finally:
        if p is not None and a.events:
            with open(a.events, "a") as f:
                for e in p.events:
                    f.write(json.dumps(e) + "\n")
    summary = {"type": "summary", "batches": len(plan), "first_batch_seconds": first,
               "total_seconds": time.time() - t0, "peak_cache_bytes": peak,
               "pipeline_exit": rc, "restarts": p.restarts if p is not None else 0}
    out.write(json.dumps(summary) + "\n")
    out.flush()
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
