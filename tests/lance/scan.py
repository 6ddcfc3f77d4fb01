#!/usr/bin/env python3
"""Scan columns of one version of a Lance dataset with pylance (what a
training job does): scan.py DATASET VERSION COL[,COL...]"""
import sys
import lance

ds = lance.dataset(sys.argv[1], version=int(sys.argv[2]))
t = ds.to_table(columns=sys.argv[3].split(","))
print(t.num_rows)
