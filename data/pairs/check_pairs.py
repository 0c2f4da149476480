#!/usr/bin/env python3
"""Checks data/pairs/requests.jsonl against the rules in data/pairs/README.md.

Standard library only. Usage: python3 data/pairs/check_pairs.py [FILE]
Prints the counts tables and exits 1 if any rule is broken.
"""

import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

REQUIRED = {"a", "b", "same", "kind", "source", "split"}
OPTIONAL = {"hard"}
KINDS = {"request", "topic"}
SPLITS = {"train", "test"}
SAME_BY_SOURCE = {
    "verbatim": True,
    "paraphrase": True,
    "related": False,
    "unrelated": False,
    "hard-negative": False,
}
# hard kind -> the sources it may use
HARD = {
    "synonym": {"paraphrase"},
    "report": {"related"},
    "aspect": {"related"},
    "direction": {"hard-negative"},
    "values": {"hard-negative"},
    "surface": {"verbatim", "paraphrase"},
    "long": {"verbatim", "paraphrase", "related", "hard-negative"},
}
MAX_PAIRS_PER_TEXT = 3


def main(path):
    errors = []
    rows = []
    raw = Path(path).read_bytes()
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if not line:
            if number != raw.count(b"\n") + 1:
                errors.append(f"{number}: blank line")
            continue
        try:
            row = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            errors.append(f"{number}: not a JSON line ({err})")
            continue
        if not isinstance(row, dict):
            errors.append(f"{number}: not a JSON object")
            continue
        keys = set(row)
        if REQUIRED - keys:
            errors.append(f"{number}: missing {sorted(REQUIRED - keys)}")
            continue
        if keys - REQUIRED - OPTIONAL:
            errors.append(f"{number}: unknown fields {sorted(keys - REQUIRED - OPTIONAL)}")
        for field in ("a", "b"):
            if not isinstance(row[field], str) or not row[field].strip():
                errors.append(f"{number}: {field} is not a non-empty string")
        if not isinstance(row["same"], bool):
            errors.append(f"{number}: same is not a bool")
        if row["kind"] not in KINDS:
            errors.append(f"{number}: kind {row['kind']!r}")
        if row["split"] not in SPLITS:
            errors.append(f"{number}: split {row['split']!r}")
        if row["source"] not in SAME_BY_SOURCE:
            errors.append(f"{number}: source {row['source']!r}")
        elif row["same"] is not SAME_BY_SOURCE[row["source"]]:
            errors.append(f"{number}: same={row['same']} does not match source {row['source']}")
        if "hard" in row:
            if row["hard"] not in HARD:
                errors.append(f"{number}: hard {row['hard']!r}")
            elif row["source"] not in HARD[row["hard"]]:
                errors.append(f"{number}: hard {row['hard']} with source {row['source']}")
        if row.get("a") == row.get("b"):
            errors.append(f"{number}: a and b are the same text")
        rows.append((number, row))

    # no pair twice (either order), a text in at most three pairs, no text in both splits
    seen_pairs = {}
    splits_of = defaultdict(set)
    uses = Counter()
    for number, row in rows:
        key = frozenset((row["a"], row["b"]))
        if key in seen_pairs:
            errors.append(f"{number}: repeats the pair on line {seen_pairs[key]}")
        seen_pairs.setdefault(key, number)
        for text in {row["a"], row["b"]}:
            splits_of[text].add(row["split"])
            uses[text] += 1
    for text, splits in splits_of.items():
        if len(splits) > 1:
            errors.append(f"text in both splits: {text!r}")
    for text, count in uses.items():
        if count > MAX_PAIRS_PER_TEXT:
            errors.append(f"text in {count} pairs: {text!r}")

    print_counts(rows, uses)
    for error in errors:
        print("ERROR", error)
    print(f"{len(rows)} lines, {len(errors)} errors")
    return 1 if errors else 0


def table(title, rows, key):
    count = Counter((key(row), row["split"]) for _, row in rows)
    names = sorted({name for name, _ in count}, key=str)
    total = len(rows)
    print(f"\n{title}")
    print(f"{'':24} {'train':>6} {'test':>6} {'total':>6} {'share':>7} {'test%':>6}")
    for name in names:
        train, test = count[(name, "train")], count[(name, "test")]
        print(f"{str(name):24} {train:6} {test:6} {train + test:6} "
              f"{100 * (train + test) / total:6.1f}% {100 * test / (train + test):5.1f}%")
    train = sum(1 for _, row in rows if row["split"] == "train")
    print(f"{'total':24} {train:6} {total - train:6} {total:6}")


def print_counts(rows, uses):
    table("by source", rows, lambda row: row["source"])
    table("by same", rows, lambda row: f"same: {str(row['same']).lower()}")
    table("by kind", rows, lambda row: row["kind"])
    hard = [(n, row) for n, row in rows if "hard" in row]
    if hard:
        table("by hard (lines with a hard field)", hard, lambda row: row["hard"])
        table("by hard x same", hard, lambda row: f"{row['hard']} {str(row['same']).lower()}")
        table("by hard x kind", hard, lambda row: f"{row['hard']} {row['kind']}")
    def bucket(text):
        words = len(text.split())
        return "2-5" if words <= 5 else "6-20" if words <= 20 else "21+"

    texts = [text for _, row in rows for text in (row["a"], row["b"])]
    by_words = dict(sorted(Counter(map(bucket, texts)).items()))
    print(f"\ntexts (a and b of every line): {len(texts)}; by words: {by_words}")
    print(f"distinct texts: {len(uses)}")


if __name__ == "__main__":
    default = Path(__file__).with_name("requests.jsonl")
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else default))
