#!/usr/bin/env python3
"""head_accept.py's offline model of --speculative-chain-stop-probability (spec/chain_stop.hpp at
batch 1): how many tokens a chain drafts for given top probabilities, and the greedy rounds it
makes over hand-made acceptance tables.

  chain_stop_rounds_test.py
"""
import os
import sys

try:
    import torch
except ImportError:
    print("torch is not installed: skipped")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tools", "train_eagle3"))
import head_accept  # noqa: E402

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


# The first token always; another while the product is >= the threshold; at most the steps.
check(head_accept.stop_length([0.1, 0.9, 0.9], 0.2) == 1, "a first token below the threshold ends the chain at one token")
check(head_accept.stop_length([0.9, 0.5, 0.9], 0.4) == 3, "0.9, 0.45 go on; 0.405 is still >= 0.4: three tokens, all of them")
check(head_accept.stop_length([0.9, 0.5, 0.5, 0.9], 0.4) == 3, "0.225 < 0.4 after the third token: it is kept, the fourth is not drafted")
check(head_accept.stop_length([1.0, 1.0], 1.0) == 2, "an inclusive threshold")

# One prompt of 1 token and an answer of 6 (positions 0-5 predict answer tokens): the round at
# position i drafts positions i+1.., right while inside the answer, as head_accept masks them.
# Top probabilities 0.9: threshold 0.5 keeps 0.9, 0.81, 0.729: full 3-token chains; rounds at
# 0 (3 accepted, 4 tokens) and 4 (position 5 accepted, 2 tokens): 3 tokens a verify.
i, k = torch.arange(8)[:, None], torch.arange(3)[None, :]
right = (i + 1 + k <= 5)[None]
tops = torch.full((1, 8, 3), 0.9)
acc, drafted = head_accept.chain_stop_rounds(right, tops, [(1, 6)], 0.5)
check(drafted == 3.0, f"full chains draft 3 tokens a round, got {drafted}")
check(abs(acc - 3.0) < 1e-9, f"rounds of 4 and 2 tokens: 3 a verify, got {acc}")
# A threshold above 0.9: one token a round, accepted: rounds at 0, 2, 4 of 2 tokens each.
acc, drafted = head_accept.chain_stop_rounds(right, tops, [(1, 6)], 0.95)
check(drafted == 1.0 and abs(acc - 2.0) < 1e-9, f"one-token chains: 2 tokens a verify, got {acc}, {drafted}")
# Nothing right: every round commits the bonus token alone, whatever the chain.
acc, drafted = head_accept.chain_stop_rounds(torch.zeros(1, 8, 3, dtype=torch.bool), tops, [(1, 6)], 0.5)
check(acc == 1.0 and drafted == 3.0, f"rejected chains commit one token a round, got {acc}, {drafted}")

if failures:
    sys.exit(1)
print("chain stop rounds: ok")
