"""The decode rows of the foundation bench that sat within 0.5% of the best peer (run 7), timed again in 12
interleaved rounds against torch.compile and Liger (the bench's own cases, input sets and graph timing; every implementation once a round):
per-round ratio best peer / ours, its median and range, and how many rounds ours was faster."""
import statistics
import sys
sys.path.insert(0, "bench")
import common
import activations
import norms
import rope

ROUNDS = 12
WANT = {("rms_norm", "1x576"), ("add_rms_norm", "1x576"), ("silu_mul", "1x8960"), ("head_norm_rope", "T4 H16 D256"),
        ("head_norm_rope", "T1 H8 D256")}
cases = [c for mod in (norms, activations, rope) for c in mod.cases() if (c.op, c.shape) in WANT]
print(f"{len(cases)} cases: {[(c.op, c.shape) for c in cases]}", flush=True)
for case in cases:
    agreement = common.check_agreement(case)
    impls = {k: v for k, v in case.impls.items()  # ours and the peers that were best somewhere (eager ones never)
             if k in ("mlx-native", "torch.compile", "liger") and not isinstance(agreement.get(k), str)}
    sets = common._input_sets(case)
    rounds = []
    for _ in range(ROUNDS):
        rounds.append({k: common.time_graph(v.fn, sets) for k, v in impls.items()})
    peers = [k for k in impls if k != "mlx-native" and all(r[k] is not None for r in rounds)]
    assert peers, (case.op, case.shape, rounds[0])
    best_peer = min(peers, key=lambda k: min(r[k] for r in rounds))
    ratios = [r[best_peer] / r["mlx-native"] for r in rounds]
    wins = sum(q >= 1.0 for q in ratios)
    print(f"{case.op} {case.shape}: best peer {best_peer}; best-of-rounds ours {min(r['mlx-native'] for r in rounds):.3f}"
          f" vs {min(r[best_peer] for r in rounds):.3f} us; per-round ratio median {statistics.median(ratios):.4f}, "
          f"range {min(ratios):.4f}-{max(ratios):.4f}, ours faster or equal in {wins}/{ROUNDS} rounds", flush=True)
