#!/usr/bin/env python3
"""The EAGLE-3 head's extra training prompts (tools/train_eagle3/texts.py) never name a held-out
topic, so the held-out evaluation stays unseen: cookie-file parsing, the held-out filter (whole
words, plurals and -ing/-ed forms, singulars of plural topics), the counts asked for, and
reproducibility. Standard library only; a fortune folder and word list are written here."""
import os
import re
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "train_eagle3"))
import prompts as prompt_sets  # noqa: E402
import texts  # noqa: E402

HELD = ["dogs", "prime numbers", "tea", "machine learning"]
FORTUNES = """A dog is a good friend to have on a long walk.
%
Fishing is the art of patience, said nobody in particular.
%
She poured the tea and waited for the storm.
%
His dogged effort paid off in the end, as hard work does.
%
The machines hummed all night in the old mill by the river.
%
Never trust a man who owns too many clocks.
		-- An old saying
%
B\x08Bo\x08ol\x08ld\x08d text is still text, even when printed twice.
%
Short.
%
A dog's life is not so bad when the sun is warm and the porch is wide.
"""
WORDS = "dog\ndogs\ndogged\nteacup\nteapot\nprimer\nwindow\ngarden\nlantern\nisn't\nA\nmeadow\nlearning\nlearned\n"


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        sys.exit(1)


def main():
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "fortunes"))
        open(os.path.join(d, "fortunes", "misc"), "w", encoding="latin-1").write(FORTUNES)
        open(os.path.join(d, "fortunes", "ascii-art"), "w").write("A tea pot drawn in letters, long enough to keep.\n")
        open(os.path.join(d, "words"), "w").write(WORDS)

        got = texts.fortunes(os.path.join(d, "fortunes"))
        check("Never trust a man who owns too many clocks." in got, f"attribution lines dropped: {got}")
        check("Bold text is still text, even when printed twice." in got, f"overstrike removed: {got}")
        check("Short." not in got, "entries under 20 characters dropped")
        check(not any("tea pot drawn" in t for t in got), "skipped cookie files are not read")

        ps = texts.text_prompts(d, 100, 100, HELD, 0)
        banned = texts._held_out_words(HELD)
        check({"dogs", "dog", "prime", "numbers", "number", "tea", "machine", "learning"} <= banned, f"held-out words: {banned}")
        for p in ps:
            quoted = re.findall(r'"(.*)"|\'(.*)\'', p)
            body = " ".join(a or b for a, b in quoted)
            check(not texts._mentions(body, banned), f"prompt names a held-out topic: {p!r}")
        joined = " ".join(ps)
        for gone in ("A dog is a good friend", "poured the tea", "A dog's life", "The machines hummed", "'dog'", "'dogs'", "'learning'"):
            check(gone not in joined, f"{gone!r} should be filtered out")
        for kept in ("dogged effort", "Fishing is the art", "'teacup'", "'dogged'", "'window'", "'learned'"):
            check(kept in joined, f"{kept!r} should be kept (not a held-out word)")
        check("'isn't'" not in joined and "'A'" not in joined, "words are lowercase letters, 5-11 of them")

        check(len(texts.text_prompts(d, 2, 3, HELD, 0)) == 5, "the counts asked for")
        check(texts.text_prompts(d, 3, 3, HELD, 7) == texts.text_prompts(d, 3, 3, HELD, 7), "same seed, same prompts")

        # The request templates on words as topics: the same filter, the templates, the count, the seed.
        topics = texts.word_topic_prompts(d, 100, prompt_sets.TEMPLATES, HELD, 0)
        templated = {tpl.format(t=w): w for tpl in prompt_sets.TEMPLATES for w in ("teacup", "teapot", "primer", "window", "garden", "lantern", "meadow")}
        check(len(topics) == 7 and all(p in templated for p in topics), f"templates over the kept words: {topics}")
        check(sorted(templated[p] for p in topics) == ["garden", "lantern", "meadow", "primer", "teacup", "teapot", "window"],
              f"every kept word once, none held out, no -ed form: {topics}")
        check(len(texts.word_topic_prompts(d, 3, prompt_sets.TEMPLATES, HELD, 0)) == 3, "the count asked for")
        check(texts.word_topic_prompts(d, 0, prompt_sets.TEMPLATES, HELD, 0) == [], "none asked, none made")
        check(texts.word_topic_prompts(d, 5, prompt_sets.TEMPLATES, HELD, 3) == texts.word_topic_prompts(d, 5, prompt_sets.TEMPLATES, HELD, 3),
              "same seed, same prompts")

    # The real split: the held-out topics are the ones the filter bans, and the two sets are disjoint.
    train, held = prompt_sets.split(0)
    check(not set(train) & set(held) and len(held) > 0, "training and held-out topics are disjoint")
    print(f"PASS ({len(ps)} prompts checked)")


if __name__ == "__main__":
    main()
