#!/usr/bin/env python3
"""Independent click-stream generator (pure Python) for probing denoiser.

Written at stop 69 apart from the model and from `denoiser-lab gen`, with other
assumptions, so that the model is not judged on its own generator alone
(docs/design/model.md, "Found at stop 69, not built: an independent generator").
Not part of `make test`. Output: JSON lines with user_id, item_id, ts (ms),
optional dwell_ms and event, and truth ("genuine" / "noise"), for
`denoiser replay --truth field`. A summary of what it generated goes to stdout.

World: users and items with latent-factor taste (dim D, N(0,1) vectors),
Zipf item popularity on a random permutation of ids (popularity is not id
order), items laid out on "shelves" (category = the item's dominant latent
factor and sign; within a shelf by popularity), so shelf neighbours share taste.

Genuine interactions: each ordinary user draws items from a popularity-sampled
candidate pool weighted by exp(beta * taste); funnel view|click -> cart ->
purchase -> (rarely) return, all labelled genuine; sessions with lognormal gaps.

Noise kinds (shares of the noise budget, --mix):
  adj    accidental click on a shelf neighbour (+-1..2) of a genuine item, 0.5-4 s
         after it (noise correlated with taste, not random pairs);
  bait   clickbait on the ~30 most popular items, a few seconds after a genuine event;
  bot    bot users scanning items sequentially by id, ~1 s apart, long sessions;
  nuser  users whose every event is noise (popularity-driven, human rhythm).
Dwell: overlapping lognormals; with --idle the adj/bait/bot noise dwell is LONGER
(idle tabs, median 90 s) than genuine (median ~30 s). --dwell-share masks dwell
per event; --no-types drops the event field.
"""
import argparse, bisect, json, math, random


def cumsum(ws):
    out, s = [], 0.0
    for w in ws:
        s += w
        out.append(s)
    return out


def draw(rng, cum):
    return bisect.bisect_left(cum, rng.random() * cum[-1])


def lognorm(rng, median, sigma):
    return median * math.exp(rng.gauss(0, sigma))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--events", type=int, default=100000)
    ap.add_argument("--users", type=int, default=10000)
    ap.add_argument("--items", type=int, default=5000)
    ap.add_argument("--noise", type=float, default=0.2)
    ap.add_argument("--mix", default="adj=0.4,bait=0.3,bot=0.15,nuser=0.15")
    ap.add_argument("--dwell-share", type=float, default=1.0)
    ap.add_argument("--no-types", action="store_true")
    ap.add_argument("--idle", action="store_true", help="noise dwell longer than genuine (idle tabs)")
    ap.add_argument("--slow-noise", action="store_true", help="noise timed like genuine events (no fast bursts)")
    ap.add_argument("--zipf", type=float, default=1.0)
    ap.add_argument("--dim", type=int, default=8)
    ap.add_argument("--beta", type=float, default=2.5)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    mix = {k: float(v) for k, v in (p.split("=") for p in a.mix.split(","))}
    tot = sum(mix.values())
    mix = {k: v / tot for k, v in mix.items()}

    I, U, D = a.items, a.users, a.dim
    # items
    perm = list(range(I))
    rng.shuffle(perm)
    pop = [0.0] * I
    for rank, i in enumerate(perm):
        pop[i] = 1.0 / (rank + 1) ** a.zipf
    popcum = cumsum(pop)
    ivec = [[rng.gauss(0, 1) for _ in range(D)] for _ in range(I)]
    # shelves: category = argmax |v_k| with sign, then by popularity
    def cat(v):
        k = max(range(D), key=lambda j: abs(v[j]))
        return 2 * k + (v[k] > 0)
    shelf = sorted(range(I), key=lambda i: (cat(ivec[i]), -pop[i]))
    shelfpos = [0] * I
    for p, i in enumerate(shelf):
        shelfpos[i] = p
    topbait = perm[:30]  # most popular items
    baitcum = cumsum([pop[i] for i in topbait])

    # users: ordinary, bots, noise-only users
    n_noise = round(a.noise * a.events)
    n_gen = a.events - n_noise
    budget = {k: round(mix.get(k, 0) * n_noise) for k in ("adj", "bait", "bot", "nuser")}
    budget["adj"] += n_noise - sum(budget.values())
    n_bots = max(2, U // 400) if budget["bot"] else 0
    n_nu = max(5, int(U * 0.04)) if budget["nuser"] else 0
    n_ord = U - n_bots - n_nu
    uid = list(range(U))
    rng.shuffle(uid)
    ord_users = uid[:n_ord]
    bots = uid[n_ord:n_ord + n_bots]
    nusers = uid[n_ord + n_bots:]
    act = [math.exp(rng.gauss(0, 1.2)) for _ in range(n_ord)]
    actcum = cumsum(act)

    T0 = 1_700_000_000_000
    SPAN = 30 * 86400 * 1000
    events = []  # (ts, user, item, type, truth, dwell_kind)

    def dwell_for(kind, typ):
        if kind == "gen":
            med = {"view": 20, "click": 35, "cart": 15, "purchase": 60, "return": 10}[typ]
            return lognorm(rng, med * 1000, 1.0)
        if a.idle and kind in ("adj", "bait", "bot"):
            return lognorm(rng, 90_000, 1.0)
        med = {"adj": 2500, "bait": 6000, "bot": 3000, "nuser": 7000}[kind]
        return lognorm(rng, med, 1.0)

    # --- genuine: count interactions per ordinary user until n_gen events planned
    inter_count = [0] * n_ord
    plans = []  # per interaction: list of types
    owner = []
    g = 0
    while g < n_gen:
        k = draw(rng, actcum)
        types = ["view" if rng.random() < 0.5 else "click"]
        if rng.random() < 0.2:
            types.append("cart")
            if rng.random() < 0.45:
                types.append("purchase")
                if rng.random() < 0.08:
                    types.append("return")
        types = types[: n_gen - g]
        g += len(types)
        plans.append(types)
        owner.append(k)
        inter_count[k] += 1
    by_user = [[] for _ in range(n_ord)]
    for idx, k in enumerate(owner):
        by_user[k].append(idx)

    sqrtD = math.sqrt(D)
    anchors = []  # (ts, user, item) of genuine interactions' first event
    for k in range(n_ord):
        ids = by_user[k]
        if not ids:
            continue
        u = ord_users[k]
        uv = [rng.gauss(0, 1) for _ in range(D)]
        P = min(200, 30 + 10 * len(ids))
        pool = list({draw(rng, popcum) for _ in range(P)})
        w = [math.exp(a.beta * sum(x * y for x, y in zip(uv, ivec[i])) / sqrtD) for i in pool]
        pcum = cumsum(w)
        # sessions
        nsess = max(1, round(len(ids) / (1 + rng.expovariate(1 / 3.0))))
        starts = sorted(T0 + rng.random() * SPAN for _ in range(nsess))
        per = [[] for _ in range(nsess)]
        for idx in ids:
            per[rng.randrange(nsess)].append(idx)
        for s, lst in zip(starts, per):
            t = s
            for idx in lst:
                item = pool[draw(rng, pcum)]
                for step, typ in enumerate(plans[idx]):
                    if typ == "return":
                        tt = t + lognorm(rng, 3 * 86400_000, 0.5)
                    else:
                        tt = t
                    events.append((tt, u, item, typ, "genuine", dwell_for("gen", typ)))
                    if step == 0:
                        anchors.append((t, u, item))
                    if typ != "return":
                        t = tt + lognorm(rng, 20_000, 0.8)
                t += lognorm(rng, 40_000, 0.9)

    # --- (a) accidental adjacent clicks
    for _ in range(budget["adj"]):
        t, u, item = anchors[rng.randrange(len(anchors))]
        off = rng.choice((-2, -1, -1, 1, 1, 2))
        p = min(I - 1, max(0, shelfpos[item] + off))
        if shelf[p] == item:
            p = p + 1 if p + 1 < I else p - 1
        typ = "click" if rng.random() < 0.7 else "view"
        events.append((t + (lognorm(rng, 30_000, 0.9) if a.slow_noise else lognorm(rng, 1500, 0.6)), u, shelf[p], typ, "noise", dwell_for("adj", typ)))
    # --- (b) clickbait on the most popular items
    for _ in range(budget["bait"]):
        t, u, _item = anchors[rng.randrange(len(anchors))]
        item = topbait[draw(rng, baitcum)]
        r = rng.random()
        typ = "click" if r < 0.8 else ("view" if r < 0.97 else "cart")
        events.append((t + (lognorm(rng, 30_000, 0.9) if a.slow_noise else lognorm(rng, 5000, 0.7)), u, item, typ, "noise", dwell_for("bait", typ)))
    # --- (c) bots scanning sequentially by id
    left = budget["bot"]
    bi = 0
    while left > 0 and n_bots:
        u = bots[bi % n_bots]
        bi += 1
        L = min(left, rng.randint(40, 300))
        start = rng.randrange(I)
        t = T0 + rng.random() * SPAN
        for j in range(L):
            events.append((t, u, (start + j) % I, "view", "noise", dwell_for("bot", "view")))
            t += lognorm(rng, 40_000, 0.9) if a.slow_noise else lognorm(rng, 1000, 0.4)
        left -= L
    # --- (d) noise-only users (popularity-driven, human rhythm)
    if n_nu:
        nact = [math.exp(rng.gauss(0, 1.0)) for _ in range(n_nu)]
        ncum = cumsum(nact)
        counts = [0] * n_nu
        for _ in range(budget["nuser"]):
            counts[draw(rng, ncum)] += 1
        for k, c in enumerate(counts):
            u = nusers[k]
            t = T0 + rng.random() * SPAN
            for j in range(c):
                if rng.random() < 0.25:
                    t = T0 + rng.random() * SPAN  # a new session somewhere
                item = draw(rng, popcum) if rng.random() < 0.7 else rng.randrange(I)
                r = rng.random()
                typ = "view" if r < 0.5 else ("click" if r < 0.9 else ("cart" if r < 0.98 else "purchase"))
                events.append((t, u, item, typ, "noise", dwell_for("nuser", typ)))
                t += lognorm(rng, 40_000, 0.9) if a.slow_noise else lognorm(rng, 15_000, 0.8)

    events.sort(key=lambda e: e[0])
    n_out = {"genuine": 0, "noise": 0}
    last = 0
    with open(a.out, "w") as f:
        for ts, u, item, typ, truth, dw in events:
            ts = int(ts)
            if ts <= last:
                ts = last + 1
            last = ts
            rec = {"user": "u%d" % u, "item": "i%d" % item, "ts": ts}
            if not a.no_types:
                rec["event"] = typ
            if typ != "return" and rng.random() < a.dwell_share:
                rec["dwell_ms"] = int(dw)
            rec["truth"] = truth
            n_out[truth] += 1
            f.write(json.dumps(rec, separators=(",", ":")) + "\n")
    tot = sum(n_out.values())
    print(json.dumps({"out": a.out, "events": tot, "noise_share": round(n_out["noise"] / tot, 4),
                      "budget": budget, "bots": n_bots, "noise_users": n_nu,
                      "users_seen": len({e[1] for e in events}), "items_seen": len({e[2] for e in events})}))


if __name__ == "__main__":
    main()
