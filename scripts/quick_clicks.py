#!/usr/bin/env python3
"""A click stream whose quick clicks are a mix of noise and genuine ones.

    python3 scripts/quick_clicks.py --out X.jsonl [--events N] [--users U] [--items I]
        [--noise 0.2] [--nq 0.5] [--gq 0] [--kind uni|pop|taste|mix] [--beta 3] [--seed 1]

Written by a reviewer at stop 71 to find where reading the gap's separation
from a burst (docs/design/model.md, "The gap's separation from a burst")
goes wrong; not part of make test. Each user has a taste (a vector of --dim
factors) and a pool of 150 items drawn by Zipf popularity; a genuine click
draws from the pool by popularity × exp(beta · taste), a noise click
uniformly (--kind uni: the classifier can find it), by popularity (pop),
from the pool as a genuine one does (taste: it cannot) or half and half
(mix). Each click after a user's first comes, with probability --nq for
noise and --gq for genuine, a uniform 1-2 s (--qlo, --qhi) after the
previous one, else about 30 s after it (lognormal, sigma 1) or, one time in
ten, hours later. --noise-users makes that share of users send only noise.
Lines are {"user", "item", "ts" (ms), "truth": "genuine" | "noise"}, in
time order.
"""

import argparse
import bisect
import collections
import json
import math
import random


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--events", type=int, default=100000)
    ap.add_argument("--users", type=int, default=8000)
    ap.add_argument("--items", type=int, default=3000)
    ap.add_argument("--noise", type=float, default=0.2)
    ap.add_argument("--nq", type=float, default=0.5, help="share of noise clicks that are quick")
    ap.add_argument("--gq", type=float, default=0.0, help="share of genuine clicks that are quick")
    ap.add_argument("--kind", default="uni", choices=["uni", "pop", "taste", "mix"])
    ap.add_argument("--beta", type=float, default=3.0)
    ap.add_argument("--dim", type=int, default=8)
    ap.add_argument("--qlo", type=float, default=1.0)
    ap.add_argument("--qhi", type=float, default=2.0)
    ap.add_argument("--noise-users", type=float, default=0.0, help="share of users whose clicks are all noise")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    r = random.Random(a.seed)
    n_items, n_users, dim = a.items, a.users, a.dim
    pop = [1.0 / (k + 1) for k in range(n_items)]
    r.shuffle(pop)
    factors = [[r.gauss(0, 1) for _ in range(dim)] for _ in range(n_items)]

    def cum(ws):
        s, out = 0, []
        for w in ws:
            s += w
            out.append(s)
        return out

    pop_cum = cum(pop)

    def draw(c):
        return bisect.bisect_left(c, r.random() * c[-1])

    activity = [math.exp(r.gauss(0, 1.0)) for _ in range(n_users)]
    total = sum(activity)
    noise_users = set(r.sample(range(n_users), int(n_users * a.noise_users)))
    t0, span = 1_700_000_000_000, 30 * 86400 * 1000
    events = []
    for u in range(n_users):
        n = max(1, round(a.events * activity[u] / total))
        taste = [r.gauss(0, 1) for _ in range(dim)]
        pool = list({draw(pop_cum) for _ in range(150)})
        weights = [math.exp(a.beta * sum(x * y for x, y in zip(taste, factors[i])) / math.sqrt(dim)) for i in pool]
        pool_cum = cum(weights)
        t = t0 + r.random() * span
        for j in range(n):
            noisy = (u in noise_users) or (r.random() < a.noise)
            quick = j > 0 and r.random() < (a.nq if noisy else a.gq)
            kind = a.kind
            if noisy:
                if kind == "mix":
                    kind = "uni" if r.random() < 0.5 else "taste"
                if kind == "uni":
                    item = r.randrange(n_items)
                elif kind == "pop":
                    item = draw(pop_cum)
                else:
                    item = pool[draw(pool_cum)]
            else:
                item = pool[draw(pool_cum)]
            if j > 0:
                if quick:
                    gap = r.uniform(a.qlo, a.qhi) * 1000
                elif r.random() < 0.1:
                    gap = r.expovariate(1 / (6 * 3600_000))
                else:
                    gap = 30_000 * math.exp(r.gauss(0, 1.0))
                t += gap
            events.append([t, u, item, "noise" if noisy else "genuine"])
    events.sort()
    with open(a.out, "w") as f:
        for t, u, item, truth in events:
            f.write(json.dumps({"user": "u%d" % u, "item": "i%d" % item, "ts": int(t), "truth": truth}) + "\n")
    print(len(events), dict(collections.Counter(e[3] for e in events)))


if __name__ == "__main__":
    main()
