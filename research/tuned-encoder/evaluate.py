"""Does the tuned encoder's cosine add to the judge's features?

Fits the judge's logistic model (scikit-learn, the same 14 features that
`loopguard tune --out DIR` writes to DIR/judge.json) with and without the
tuned cosine as a 15th feature, on the train split (its out-of-fold tuned
cosines), picks each threshold on train at precision >= 0.90 (best F1
there), and scores the test split and the unseen batches 16-18.

    python evaluate.py pairs-with-unseen > /tmp/with-unseen.jsonl
        the train pairs plus the unseen batches as `test`, for the second
        `loopguard tune` run below
    python evaluate.py score OOF.jsonl FULL.jsonl SHIPPED/judge.json UNSEEN/judge.json
        where SHIPPED is `loopguard tune --pairs data/pairs/requests.jsonl
        --judge calibrated --out SHIPPED` and UNSEEN the same on
        /tmp/with-unseen.jsonl
    python evaluate.py score-half HALF.jsonl SHIPPED/judge.json UNSEEN/judge.json
        finetune.py half's output: the weights fitted on the half of the
        train pairs the encoder did not see
"""

import json
import os
import sys

import numpy as np
from sklearn.linear_model import LogisticRegression

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
PAIRS = os.path.join(ROOT, "data", "pairs", "requests.jsonl")
UNSEEN = os.path.join(ROOT, "data", "pairs", "unseen-batches-16-18.jsonl")
FLOOR = 0.5  # the judge scores 0 below this cosine (the detectors' candidate floor)


def read(path):
    with open(path, encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def rows_of(judge_json, pairs, tuned):
    """(features, label, tuned cosine) per pair, in the pairs file's order."""
    found = json.load(open(judge_json, encoding="utf-8"))["pairs"]
    assert len(found) == len(pairs), "judge.json is of another pairs file"
    rows = []
    for (_line, same, _test, features), pair in zip(found, pairs):
        assert same == pair["same"], "judge.json is of another pairs file"
        rows.append((np.array(features), same, tuned[(pair["a"], pair["b"])]))
    return rows


def matrix(rows, with_tuned):
    return np.array([list(f) + ([t] if with_tuned else []) for f, _, t in rows])


def scores(model, rows, with_tuned):
    p = model.predict_proba(matrix(rows, with_tuned))[:, 1]
    return np.where(np.array([f[0] for f, _, _ in rows]) < FLOOR, 0.0, p)


def counts(s, y, threshold):
    tp = int(((s > threshold) & y).sum())
    fp = int(((s > threshold) & ~y).sum())
    fn = int(((s <= threshold) & y).sum())
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0), tp, fp, fn


def threshold_on(s, y, floor=0.90):
    best = (0.0, 0.5)
    for t in sorted(set(np.round(s, 3))):
        p, _, f, *_ = counts(s, y, t)
        if p >= floor and f > best[0]:
            best = (f, t)
    return best[1]


def score_half(half, shipped, unseen_judge):
    """The judge's weights fitted on the half of the train pairs the
    encoder did not train on, with and without the tuned cosine."""
    scored = read(half)
    tuned = {(r["a"], r["b"]): r["cos_ft"] for r in scored}
    weights_half = {(r["a"], r["b"]) for r in scored if r.get("half") == "weights"}
    pairs = read(PAIRS)
    train_pairs = [p for p in pairs if p["split"] == "train"]
    # The encoder's own half has no tuned cosine here, and is not used.
    tuned_or_none = {**{(p["a"], p["b"]): 0.0 for p in pairs}, **tuned}
    everything = rows_of(shipped, pairs, tuned_or_none)
    fit_rows = [row for row, p in zip(everything, pairs) if (p["a"], p["b"]) in weights_half]
    test = [row for row, p in zip(everything, pairs) if p["split"] == "test"]
    unseen = rows_of(unseen_judge, train_pairs + read(UNSEEN), tuned_or_none)[len(train_pairs):]
    labels = lambda rows: np.array([same for _, same, _ in rows])
    for with_tuned in (False, True):
        model = LogisticRegression(C=1.0, max_iter=5000).fit(matrix(fit_rows, with_tuned), labels(fit_rows))
        threshold = threshold_on(scores(model, fit_rows, with_tuned), labels(fit_rows))
        name = "14 features + tuned cosine" if with_tuned else "14 features"
        print(f"{name}, fitted on the weights' half: threshold {threshold}")
        for split, rows in (("test", test), ("unseen 16-18", unseen)):
            p, r, f, tp, fp, fn = counts(scores(model, rows, with_tuned), labels(rows), threshold)
            print(f"  {split:<13} P {p:.2f}  R {r:.2f}  F1 {f:.2f}  ({tp}/{fp}/{fn})")


def main():
    if sys.argv[1] == "pairs-with-unseen":
        for pair in read(PAIRS):
            if pair["split"] == "train":
                print(json.dumps(pair))
        for pair in read(UNSEEN):
            print(json.dumps({**pair, "split": "test"}))
        return
    if sys.argv[1] == "score-half":
        score_half(*sys.argv[2:5])
        return
    oof, full, shipped, unseen_judge = sys.argv[2:6]
    tuned = {(r["a"], r["b"]): r["cos_ft"] for r in read(oof) + read(full)}
    pairs = read(PAIRS)
    train_pairs = [p for p in pairs if p["split"] == "train"]
    everything = rows_of(shipped, pairs, tuned)
    train = [row for row, p in zip(everything, pairs) if p["split"] == "train"]
    test = [row for row, p in zip(everything, pairs) if p["split"] == "test"]
    unseen = rows_of(unseen_judge, train_pairs + read(UNSEEN), tuned)[len(train_pairs):]
    labels = lambda rows: np.array([same for _, same, _ in rows])
    for with_tuned in (False, True):
        model = LogisticRegression(C=1.0, max_iter=5000).fit(matrix(train, with_tuned), labels(train))
        threshold = threshold_on(scores(model, train, with_tuned), labels(train))
        name = "14 features + tuned cosine" if with_tuned else "14 features"
        print(f"{name}: threshold {threshold}")
        for split, rows in (("train", train), ("test", test), ("unseen 16-18", unseen)):
            p, r, f, tp, fp, fn = counts(scores(model, rows, with_tuned), labels(rows), threshold)
            print(f"  {split:<13} P {p:.2f}  R {r:.2f}  F1 {f:.2f}  ({tp}/{fp}/{fn})")


if __name__ == "__main__":
    main()
