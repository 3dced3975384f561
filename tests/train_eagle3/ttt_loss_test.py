#!/usr/bin/env python3
"""The EAGLE-3 trainer's loss without host syncs (tools/train_eagle3/train.py: ttt_loss, masks
multiplied in) against the straightforward one that selects the taught positions by a mask (what
train.py computed before): the same loss, gradients and top-1 counts, with greedy and soft labels,
positions outside the draft vocabulary, and a step with nothing to teach. Also batch_tensors'
padding and masks. CPU torch; skipped (77) without it."""
import os
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("torch is not installed: skipped")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "train_eagle3"))
import train  # noqa: E402


def reference_loss(outs, labels, loss_mask, valid, t2d, probs):
    B, T = labels.shape
    loss, correct, counted = 0.0, [], []
    for k, logits in enumerate(outs):
        tgt_pos = torch.arange(T) + 1 + k
        at = tgt_pos.clamp(max=T - 1)
        d = t2d[labels[:, at]]
        m = loss_mask[:, at] & (tgt_pos < T)[None] & valid & (d >= 0)
        if m.sum() == 0:
            correct.append(0.0)
            counted.append(0.0)
            continue
        if probs is None:
            lk = F.cross_entropy(logits[m].float(), d[m])
        else:
            lk = -(probs[:, at][m].float() * F.log_softmax(logits[m].float(), -1)).sum(-1).mean()
        loss = loss + (0.8 ** k) * lk
        correct.append(float((logits[m].argmax(-1) == d[m]).sum()))
        counted.append(float(m.sum()))
    return loss, correct, counted


def check(soft, steps, T):
    g = torch.Generator().manual_seed(steps * 10 + soft)
    B, V, vocab = 3, 11, 40
    draft_ids = torch.sort(torch.randperm(vocab, generator=g)[:V]).values
    t2d = torch.full((vocab,), -1, dtype=torch.long)
    t2d[draft_ids] = torch.arange(V)
    # Labels mostly in the draft vocabulary, some outside it.
    labels = torch.where(torch.rand(B, T, generator=g) < 0.8, draft_ids[torch.randint(0, V, (B, T), generator=g)],
                         torch.randint(0, vocab, (B, T), generator=g))
    valid = torch.ones(B, T, dtype=torch.bool)
    valid[1, T - 2:] = False
    loss_mask = torch.zeros(B, T, dtype=torch.bool)
    loss_mask[0, 2:T - 1] = True
    loss_mask[1, 1:T - 3] = True
    loss_mask[2, 3:] = True
    probs = torch.softmax(torch.randn(B, T, V, generator=g), -1).to(torch.bfloat16) if soft else None
    base = [torch.randn(B, T, V, generator=g) for _ in range(steps)]
    a = [x.clone().requires_grad_() for x in base]
    b = [x.clone().requires_grad_() for x in base]
    loss, correct, counted = train.ttt_loss(a, labels, loss_mask, valid, t2d, probs)
    ref, ref_correct, ref_counted = reference_loss(b, labels, loss_mask, valid, t2d, probs)
    assert torch.allclose(loss, ref, rtol=1e-5, atol=1e-6), (loss, ref)
    loss.backward()
    ref.backward()
    for x, y in zip(a, b):  # a step the reference skipped has no gradient: zeros here
        assert torch.allclose(x.grad, y.grad if y.grad is not None else torch.zeros_like(x), rtol=1e-5, atol=1e-7)
    assert correct.tolist() == ref_correct and counted.tolist() == ref_counted, (correct, ref_correct, counted, ref_counted)
    return counted.tolist()


for soft in (False, True):
    counted = check(soft, steps=4, T=9)
    assert all(n > 0 for n in counted[:3]), counted
    # T = 4: steps 3 and later have no position left to teach, and add nothing (not NaN).
    counted = check(soft, steps=6, T=4)
    assert counted[3:] == [0.0, 0.0, 0.0], counted

ids, valid, loss_mask = train.batch_tensors([([5, 6], [7, 8, 9]), ([1], [2])], pad_id=0, device="cpu")
assert ids.tolist() == [[5, 6, 7, 8, 9], [1, 2, 0, 0, 0]], ids
assert valid.tolist() == [[True] * 5, [True, True, False, False, False]], valid
assert loss_mask.tolist() == [[False, False, True, True, True], [False, True, False, False, False]], loss_mask
print("ttt_loss equals the mask-selecting loss (values, gradients, top-1 counts); batch_tensors pads and masks")
