#!/usr/bin/env python3
"""Read one version of a Lance dataset with pylance as a training job does.

  scan.py DATASET VERSION COL[,COL...]   scan the columns (to_table)
  scan.py DATASET VERSION blobs:COL      fetch every blob payload of COL
"""
import sys
import lance

ds = lance.dataset(sys.argv[1], version=int(sys.argv[2]))
if sys.argv[3].startswith("blobs:"):
    col = sys.argv[3][len("blobs:"):]
    n = ds.count_rows()
    total = sum(len(b.read()) for b in ds.take_blobs(col, indices=list(range(n))))
    print(total)
else:
    t = ds.to_table(columns=sys.argv[3].split(","))
    print(t.num_rows)
