"""More varied training prompts for the EAGLE-3 head, from public text in Debian packages
(fetch_texts.sh): quotations and sayings from BSD fortune's cookie files, and words from SCOWL's
word list. prompts.py's template x topic prompts alone teach the head one narrow kind of
request; held-out prompts on unseen topics then accept fewer draft tokens than training ones.

No prompt here mentions a held-out topic (prompts.split), so the held-out evaluation stays unseen."""
import os
import random
import re

# Cookie files whose entries are not prose a chat user would quote (ASCII art, code, in-jokes
# of a mailing list, foreign-language text) or that are mostly crude humour about groups.
SKIPPED_FORTUNE_FILES = {"ascii-art", "translate-me", "perl", "debian", "linuxcookie", "ethnic", "drugs", "men-women", "knghtbrd"}

TEXT_TEMPLATES = [
    'Explain this quote: "{x}"', 'What does this saying mean? "{x}"', 'Do you agree with this? "{x}"',
    'Write a short story inspired by this line: "{x}"', 'Rewrite this in plain, simple words: "{x}"',
    'Who might say this, and why? "{x}"', 'Write a poem based on this: "{x}"', 'Is this funny? Explain why: "{x}"',
]

WORD_TEMPLATES = [
    "What does the word '{w}' mean?", "Use the word '{w}' in three sentences.", "Write a short story that uses the word '{w}'.",
    "Give me a synonym and an antonym for '{w}'.", "Where does the word '{w}' come from?", "Explain '{w}' to a child.",
]


def _held_out_words(held_out_topics):
    stop = {"the", "of", "a", "an", "and", "number", "color"}
    out = {w for t in held_out_topics for w in re.findall(r"[a-z]+", t.lower()) if w not in stop and len(w) >= 3}
    return out | {w[:-1] for w in out if w.endswith("s") and len(w) >= 4}  # "dogs" bans "dog" too


def _mentions(text, banned):
    """True when text holds a banned word (or its plural / -ing form) as a whole word."""
    for w in re.findall(r"[a-z]+", text.lower()):
        for b in banned:
            if w == b or (w.startswith(b) and w[len(b):] in ("s", "es", "ing", "ed", "er", "ers")):
                return True
    return False


def fortunes(folder):
    """Every entry of the cookie files in folder: one-paragraph text, attribution dropped."""
    out = []
    for name in sorted(os.listdir(folder)):
        if name in SKIPPED_FORTUNE_FILES:
            continue
        with open(os.path.join(folder, name), encoding="latin-1") as f:
            entries = f.read().split("\n%\n")
        for e in entries:
            lines = [ln for ln in e.strip("%\n").splitlines() if not ln.strip().startswith("--")]
            text = " ".join(" ".join(lines).split())
            text = re.sub(r".\x08", "", text)  # overstrike (bold / underline) sequences
            if 20 <= len(text) <= 300:
                out.append(text)
    return out


def words(path):
    with open(path, encoding="utf-8", errors="ignore") as f:
        return [w.strip() for w in f if re.fullmatch(r"[a-z]{5,11}", w.strip())]


def text_prompts(folder, n_fortunes, n_words, held_out_topics, seed):
    """Up to n_fortunes prompts on quotations and n_words on words, none naming a held-out topic."""
    rng = random.Random(seed)
    banned = _held_out_words(held_out_topics)
    out = []
    if n_fortunes:
        fs = [t for t in fortunes(os.path.join(folder, "fortunes")) if not _mentions(t, banned)]
        rng.shuffle(fs)
        out += [rng.choice(TEXT_TEMPLATES).format(x=t) for t in fs[:n_fortunes]]
    if n_words:
        ws = [w for w in words(os.path.join(folder, "words")) if not _mentions(w, banned)]
        rng.shuffle(ws)
        out += [rng.choice(WORD_TEMPLATES).format(w=w) for w in ws[:n_words]]
    return out


def word_topic_prompts(folder, n, templates, held_out_topics, seed):
    """n prompts of the general request templates (prompts.TEMPLATES, which the held-out evaluation
    asks too) on words of the word list as topics, none a held-out word. prompts.py has ~160
    training topics; a head trained on them accepted 2.98 tokens a round at 5 steps on training
    prompts and 2.70 on held-out ones (head_accept.py --split train / held-out, 32 prompts each):
    it had learned the topics as much as the requests. Thousands of topics teach the requests."""
    if not n:
        return []
    rng = random.Random(seed)
    banned = _held_out_words(held_out_topics)
    # Past tenses, adverbs and -ing forms read badly as topics ("Write a poem about strangled").
    ws = [w for w in words(os.path.join(folder, "words")) if not w.endswith(("ed", "ly", "ing")) and not _mentions(w, banned)]
    rng.shuffle(ws)
    return [rng.choice(templates).format(t=w) for w in ws[:n]]


if __name__ == "__main__":  # a look at what the prompts are
    import sys
    import prompts as prompt_sets
    _, held = prompt_sets.split(0)
    folder = sys.argv[1] if len(sys.argv) > 1 else ".device_model/texts"
    ps = text_prompts(folder, 100000, 100000, held, 0) + word_topic_prompts(folder, 100000, prompt_sets.TEMPLATES, held, 0)
    print(len(ps), "prompts available")
    for p in random.Random(1).sample(ps, 12):
        print(" ", p)
