#!/usr/bin/env python3
"""Hit ratio of the results kept for repeats (`inference::repeats::Kept`) under first in, first
out against the CLOCK (second-chance) policy modgate uses, on synthetic streams: a share of the
requests are files seen once, the rest drawn from a Zipf-like popularity over a set of files.

    python3 tuning/kept_policy.py

A model of the policy in `src/inference/repeats.rs`, for choosing it; the unit tests there are
what checks the Rust code.
"""
import collections
import random


def hit_ratio(policy, capacity, requests):
    kept = {}  # key -> asked for since kept or last spared
    order = collections.deque()
    hits = 0
    for key in requests:
        if key in kept:
            hits += 1
            kept[key] = True
            continue
        while len(kept) >= capacity:
            oldest = order.popleft()
            if policy == "clock" and kept[oldest]:
                kept[oldest] = False
                order.append(oldest)
            else:
                del kept[oldest]
        kept[key] = False
        order.append(key)
    return hits / len(requests)


def main():
    random.seed(7)
    n = 200_000
    for once, popular, skew in [(0.7, 10_000, 1.0), (0.5, 100_000, 0.8), (0.9, 1_000, 1.0)]:
        weights = [1 / (i + 1) ** skew for i in range(popular)]
        drawn = random.choices(range(popular), weights, k=n)
        fresh = 10**9
        requests = []
        for i in range(n):
            if random.random() < once:
                fresh += 1
                requests.append(fresh)
            else:
                requests.append(drawn[i])
        for capacity in (1024, 16384):
            print(
                f"{once:.0%} seen once, {popular} popular files (Zipf {skew}), {capacity} kept: "
                f"FIFO {hit_ratio('fifo', capacity, requests):.3f}, "
                f"CLOCK {hit_ratio('clock', capacity, requests):.3f}"
            )


if __name__ == "__main__":
    main()
