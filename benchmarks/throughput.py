"""litebert vs transformers' AlbertForPreTraining, side by side in one process (BENCHMARKS.md).

Each case alternates A, B, A, B on the same batches and reports the median of the pairwise time ratios
(transformers / litebert, so > 1 means litebert is faster), tokens/s, model FLOP utilisation against this
process's measured dense-matmul peak, and peak memory. Text is real: Moby-Dick and the State of the Union
addresses from ../shared/data, tokenized with a litebert tokenizer trained on them (cached in --cache).
Precisions: fp32, and bf16 autocast on a CPU with bf16 units (AVX512-BF16, AMX) or a GPU; elsewhere bf16 only
when asked. `--device cuda` runs both on a GPU (timings synchronised, peak memory as allocated on the GPU).

    python benchmarks/throughput.py                      # every case (slow: ~15 min on 2 cores)
    python benchmarks/throughput.py --preset tiny --case pretrain --precision fp32
    python benchmarks/throughput.py --device cuda --batch 32      # the GPU table
    python benchmarks/throughput.py --device cuda --synthetic --preset albert-base --case pretrain --batch 256

`--synthetic` needs neither the shared data nor a tokenizer: random ids from a 30,000-piece vocabulary, full-length
pretraining rows (no padding) and random-length fine-tuning sentences. On a GPU litebert gets its batches as its
training loop gives them (a mask of real tokens only dropped, padding located on the host: `prepare_batch`), and
MFU is also shown against the device's datasheet peak (litebert.train.metrics.DATASHEET_TFLOPS).
"""

from __future__ import annotations

import argparse
import bz2
import contextlib
import csv
import json
import os
import platform
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import transformers  # noqa: E402

import litebert  # noqa: E402
from litebert import hf  # noqa: E402
from litebert.model.allocator import keep_freed_memory  # noqa: E402
from litebert.model.padding import find_real_tokens  # noqa: E402
from litebert.train.metrics import peak_flops, train_flops_per_sequence  # noqa: E402
from litebert.train.optim import Lamb  # noqa: E402
from litebert.train.precision import native_bf16  # noqa: E402
from litebert.train.pretrain import prepare_batch  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"  # --data replaces it


def tokenizer(cache: Path, data: Path):
    from litebert.tokenizer import Tokenizer
    from litebert.tokenizer.train import train_tokenizer

    out = cache / "tokenizer-29k"
    if not (out / "spiece.model").exists():
        files = sorted((data / "corpora" / "moby-dick").glob("*.txt")) + sorted((data / "corpora" / "sotu").glob("*"))
        train_tokenizer(files, out, vocab_size=29000)  # 30,000 pieces need more text than ships
    return Tokenizer.load(out)


def corpus_ids(tok, data: Path, limit_tokens: int = 400_000) -> np.ndarray:
    ids: list[int] = []
    for path in sorted((data / "corpora" / "moby-dick").glob("*.txt")):
        lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
        for seq in tok.encode_batch(lines):
            ids.extend(seq)
        if len(ids) > limit_tokens:
            break
    return np.asarray(ids, dtype=np.int64)


class SyntheticVocab:
    """What the batch builders need of a tokenizer, for --synthetic: ALBERT's special ids and 30,000 pieces."""

    cls_id, sep_id, mask_id, vocab_size = 2, 3, 4, 30000


def synthetic_sentences(count: int, max_len: int, rng: np.random.Generator) -> list[list[int]]:
    """[CLS] text [SEP] of 6-60 random pieces (a review snippet's range)."""
    lengths = rng.integers(6, min(60, max_len - 2) + 1, count)
    return [[2, *rng.integers(5, 30000, n).tolist(), 3] for n in lengths]


def pretrain_batch(tok, ids: np.ndarray, B: int, T: int, short: float, rng: np.random.Generator) -> dict:
    """[CLS] A [SEP] B [SEP] from contiguous real text; `short` of the rows get a random shorter length
    (create_pretraining_data's short_seq_prob), padded; 15% of real tokens masked (whole batch shares P)."""
    input_ids = np.zeros((B, T), np.int64)
    types = np.zeros((B, T), np.int64)
    mask = np.zeros((B, T), np.int64)
    P = max(1, round(0.15 * T))
    positions = np.zeros((B, P), np.int64)
    labels = np.full((B, P), -100, np.int64)
    for b in range(B):
        n = int(rng.integers(8, T + 1)) if rng.random() < short else T
        body = n - 3
        start = int(rng.integers(0, len(ids) - body))
        a_len = body // 2
        seq = [tok.cls_id, *ids[start : start + a_len], tok.sep_id, *ids[start + a_len : start + body], tok.sep_id]
        input_ids[b, :n] = seq
        types[b, a_len + 2 : n] = 1
        mask[b, :n] = 1
        cand = np.array([i for i in range(n) if seq[i] not in (tok.cls_id, tok.sep_id)])
        k = min(P, max(1, round(0.15 * n)))
        pos = np.sort(rng.choice(cand, size=k, replace=False))
        positions[b, :k] = pos
        labels[b, :k] = input_ids[b, pos]
        input_ids[b, pos] = tok.mask_id
    batch = dict(input_ids=input_ids, token_type_ids=types, attention_mask=mask, masked_positions=positions)
    batch = {k: torch.from_numpy(v) for k, v in batch.items()}
    batch["masked_labels"] = torch.from_numpy(labels)
    batch["sentence_order_label"] = torch.from_numpy(rng.integers(0, 2, B))
    return batch


def hf_pretrain_inputs(batch: dict) -> dict:
    B, T = batch["input_ids"].shape
    labels = torch.full((B, T), -100, dtype=torch.long)
    valid = batch["masked_labels"] != -100
    rows = torch.arange(B)[:, None].expand_as(valid)
    labels[rows[valid], batch["masked_positions"][valid]] = batch["masked_labels"][valid]
    keys = ("input_ids", "token_type_ids", "attention_mask", "sentence_order_label")
    return {**{k: batch[k] for k in keys}, "labels": labels}


def sentences(tok, data: Path, count: int, max_len: int) -> list[list[int]]:
    """Real review sentences (Rotten Tomatoes critic snippets) as [CLS] text [SEP]."""
    with bz2.open(data / "labeled" / "rotten_tomatoes.csv.bz2", "rt", encoding="utf-8") as f:
        texts = [row["text"] for row in csv.DictReader(f) if row["category"] in ("fresh", "rotten")][:count]
    return [[tok.cls_id, *ids[: max_len - 2], tok.sep_id] for ids in tok.encode_batch(texts)]


def pad(seqs: list[list[int]]) -> dict:
    T = max(map(len, seqs))
    ids = torch.zeros(len(seqs), T, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
        mask[i, : len(s)] = 1
    return dict(input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids))


def finetune_batches(seqs: list[list[int]], B: int, grouped: bool, seed: int) -> list[dict]:
    """transformers' way: shuffled batches padded to their longest. litebert's: the same shuffled set cut into
    mega-batches of 16 batches, each sorted by length before splitting (length-grouped batching)."""
    order = np.random.default_rng(seed).permutation(len(seqs))
    chunks = [order[i : i + B] for i in range(0, len(order) - B + 1, B)]
    if grouped:
        out = []
        for m in range(0, len(chunks), 16):
            idx = np.concatenate(chunks[m : m + 16])
            idx = idx[np.argsort([len(seqs[i]) for i in idx], kind="stable")]
            out += [idx[i : i + B] for i in range(0, len(idx), B)]
        chunks = out
    return [pad([seqs[i] for i in c]) | {"labels": torch.tensor([len(seqs[i]) % 2 for i in c])} for c in chunks]


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def matmul_peak(dtype: torch.dtype, device: torch.device, reps: int = 6) -> float:
    n = 8192 if device.type == "cuda" else 2048
    a, b = torch.randn(n, n, dtype=dtype, device=device), torch.randn(n, n, dtype=dtype, device=device)
    a @ b
    times = []
    for _ in range(reps):
        sync(device)
        t = time.perf_counter()
        a @ b
        sync(device)
        times.append(time.perf_counter() - t)
    return 2 * n**3 / min(times)


def to(batch: dict, device: torch.device) -> dict:
    return {k: v.to(device) for k, v in batch.items()}


def ours_on(batch: dict, device: torch.device, case: str) -> dict:
    """litebert's batch on `device`. On a GPU as the training loop gives it: padding located on the host (the model
    unpads without reading the mask back), a mask of real tokens only dropped. The CPU finds them in the forward."""
    if device.type != "cuda":
        return to(batch, device)
    if case.startswith("pretrain"):
        return to(prepare_batch(batch)[0], device)
    real = find_real_tokens(batch["attention_mask"])
    return to(batch, device) | ({"real_tokens": real.to(device)} if real is not None else {})


class Pair:
    """litebert and transformers models with identical weights, each with its own LAMB."""

    def __init__(self, config: litebert.ModelConfig, tmp: Path, device: torch.device, finetune: bool = False):
        torch.manual_seed(0)
        self.ours = litebert.AlbertForPretraining(config)
        hf.save_hf(self.ours, tmp / "hf")  # written again for every pair
        self.theirs = transformers.AlbertForPreTraining.from_pretrained(tmp / "hf", attn_implementation="sdpa")
        self.ours.to(device)
        self.theirs.to(device)
        if finetune:  # the same classifier on the pooled output for both
            self.ours_head = torch.nn.Linear(config.hidden_size, 2).to(device)
            self.theirs_head = torch.nn.Linear(config.hidden_size, 2).to(device)
            self.theirs_head.load_state_dict(self.ours_head.state_dict())
        self.opt_ours = Lamb(self._named(self.ours, getattr(self, "ours_head", None)), lr=1e-5)
        self.opt_theirs = Lamb(self._named(self.theirs, getattr(self, "theirs_head", None)), lr=1e-5)

    @staticmethod
    def _named(model, head):
        named = list(model.named_parameters())
        return named + ([(f"head.{n}", p) for n, p in head.named_parameters()] if head is not None else [])


def autocast(precision: str, device: torch.device):
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


@torch.no_grad()
def parity(pair: Pair, batch: dict) -> float:
    """Max |ours - theirs| over the final hidden states at real tokens, fp32, eval mode (parity means 1e-5 or less)."""
    pair.ours.eval()
    pair.theirs.eval()
    keys = ("input_ids", "attention_mask", "token_type_ids")
    ours, _ = pair.ours.albert(*(batch[k] for k in keys))
    theirs = pair.theirs.albert(**{k: batch[k] for k in keys}).last_hidden_state
    real = batch["attention_mask"].bool()
    return float((ours.float() - theirs.float())[real].abs().max())


def run_case(
    case: str, pair: Pair, batches: tuple[list, list], precision: str, reps: int, device: torch.device, rounds: int
) -> tuple[list, list, list, list]:
    """Per timed repetition (`rounds` passes over the batches): litebert's time, transformers' time, and the
    dense-matmul peak measured right after them (MFU compares each repetition with the peak of its own moment: this
    machine's speed drifts by 10-15%); and on a GPU each library's peak allocated memory in MiB."""
    ours, theirs = pair.ours.train(), pair.theirs.train()

    def step_ours(b):
        with autocast(precision, device):
            if case.startswith("pretrain"):
                loss = ours(**b).loss
            elif case == "finetune":
                _, pooled = ours.albert(b["input_ids"], b["attention_mask"], b["token_type_ids"], b.get("real_tokens"))
                loss = torch.nn.functional.cross_entropy(pair.ours_head(pooled).float(), b["labels"])
            else:
                with torch.no_grad():
                    return ours.albert(b["input_ids"], b["attention_mask"], b["token_type_ids"], b.get("real_tokens"))
        loss.backward()
        pair.opt_ours.step()
        pair.opt_ours.zero_grad(set_to_none=True)

    def step_theirs(b):
        with autocast(precision, device):
            if case.startswith("pretrain"):
                loss = theirs(**b).loss
            elif case == "finetune":
                keys = ("input_ids", "attention_mask", "token_type_ids")
                pooled = theirs.albert(**{k: b[k] for k in keys}).pooler_output
                loss = torch.nn.functional.cross_entropy(pair.theirs_head(pooled).float(), b["labels"])
            else:
                with torch.no_grad():
                    keys = ("input_ids", "attention_mask", "token_type_ids")
                    return theirs.albert(**{k: b[k] for k in keys})
        loss.backward()
        pair.opt_theirs.step()
        pair.opt_theirs.zero_grad(set_to_none=True)

    if case == "infer":
        ours.eval()
        theirs.eval()
    ours_batches, theirs_batches = batches
    t_ours, t_theirs, peaks, mem = [], [], [], [0.0, 0.0]
    for r in range(reps + 1):  # the first round warms up both
        for i, (fn, bs, acc) in enumerate(((step_ours, ours_batches, t_ours), (step_theirs, theirs_batches, t_theirs))):
            sync(device)
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            start = time.perf_counter()
            for b in bs * rounds:
                fn(b)
            sync(device)
            if r:
                acc.append(time.perf_counter() - start)
            if device.type == "cuda":
                mem[i] = max(mem[i], torch.cuda.max_memory_allocated(device) / 2**20)
        if r:
            peaks.append(matmul_peak(torch.bfloat16 if precision == "bf16" else torch.float32, device, reps=3))
    return t_ours, t_theirs, peaks, mem


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", nargs="+", default=["tiny", "albert-base"])
    ap.add_argument("--case", nargs="+", default=["pretrain", "pretrain-short", "finetune", "infer"])
    ap.add_argument("--precision", nargs="+", help="default: fp32, and bf16 where the CPU has bf16 units")
    ap.add_argument("--seq", nargs="+", type=int, default=[128, 512])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=1, help="passes over a case's batches per timed repetition")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--cache", type=Path, default=Path(".bench-cache"))
    ap.add_argument("--data", type=Path, default=DATA, help="the shared data folder (corpora/, labeled/)")
    ap.add_argument("--synthetic", action="store_true", help="random ids: no shared data, no tokenizer training")
    ap.add_argument("--device", default="cpu", help="cpu, or cuda for the GPU table")
    ap.add_argument("--json", type=Path, default=None, help="also append results as JSON lines here")
    ap.add_argument("--compile", action="store_true", help="torch.compile litebert's model (transformers stays eager)")
    ap.add_argument("--no-dropout", action="store_true", help="the ALBERT v2 configuration: dropout 0 everywhere")
    ap.add_argument(
        "--plain-malloc",
        action="store_true",
        help="leave glibc malloc alone (default: litebert.model.allocator, as the CLI)",
    )
    args = ap.parse_args()
    device = torch.device(args.device)
    kept = False if args.plain_malloc else keep_freed_memory()  # for both libraries: they share this process
    if args.threads:
        torch.set_num_threads(args.threads)
    args.cache.mkdir(exist_ok=True)
    if args.synthetic:
        tok, ids = SyntheticVocab(), np.random.default_rng(0).integers(5, 30000, 400_000)
    else:
        tok = tokenizer(args.cache, args.data)
        ids = corpus_ids(tok, args.data)
    native = native_bf16(device)
    args.precision = args.precision or (["fp32", "bf16"] if native else ["fp32"])
    peak = {p: matmul_peak(torch.bfloat16 if p == "bf16" else torch.float32, device) for p in args.precision}
    if device.type == "cuda":
        machine = (
            f"{torch.cuda.get_device_name(device)} (CUDA {torch.version.cuda}, TF32 matmul: "
            f"{torch.backends.cuda.matmul.allow_tf32})"
        )
    else:
        caps = torch.cpu.get_capabilities()
        isa = next((n for k, n in (("amx_bf16", "AMX"), ("avx512_f", "AVX-512"), ("avx2", "AVX2")) if caps.get(k)), "-")
        machine = f"{caps.get('cpu_name') or platform.machine()} ({isa}, bf16 units: {'yes' if native else 'no'})"
    print(
        f"# {machine}, {torch.get_num_threads()} threads, "
        f"torch {torch.__version__}, transformers {transformers.__version__}, python {sys.version.split()[0]}, "
        f"malloc keeps freed memory: {kept}, dropout: {'0 (v2)' if args.no_dropout else 'the preset'}"
    )
    print("# dense matmul peak: " + ", ".join(f"{p} {v / 1e9:.0f} GFLOP/s" for p, v in peak.items()))
    sheet = {p: peak_flops(device, p) for p in args.precision}
    sheet = {p: v for p, (v, where) in sheet.items() if where.startswith("datasheet")}
    if sheet:
        print("# datasheet dense peak: " + ", ".join(f"{p} {v / 1e12:.0f} TFLOP/s" for p, v in sheet.items()))
    if not native and "bf16" not in args.precision:  # torch's bf16 matmul is a reference loop there
        print(
            "# bf16 left out: without AVX512-BF16 or AMX, torch's bf16 matmul runs ~100x below fp32 for both "
            "libraries (--precision bf16 measures it anyway)"
        )
    print(
        f"{'preset':<12} {'case':<15} {'seq':>4} {'prec':<5} {'speedup':>8} {'ours tok/s':>11} {'hf tok/s':>10} "
        f"{'ours MFU':>8} {'hf MFU':>7} {'GF/s':>6} {'peak mem':>9} {'max diff':>8}"
    )
    tmp = args.cache / "models"
    for name in args.preset:
        for case in args.case:
            seqs = [128] if case in ("finetune", "infer") else args.seq
            for T in seqs:
                v2 = dict(hidden_dropout=0.0, attention_dropout=0.0, classifier_dropout=0.0) if args.no_dropout else {}
                config = litebert.preset(name, vocab_size=tok.vocab_size, max_position=max(512, T), **v2)
                pair = Pair(config, tmp, device, finetune=case == "finetune")
                rng = np.random.default_rng(0)
                if case.startswith("pretrain"):
                    short = 0.1 if case == "pretrain-short" else 0.0
                    bs = [pretrain_batch(tok, ids, args.batch, T, short, rng) for _ in range(2)]
                    batches = ([ours_on(b, device, case) for b in bs], [to(hf_pretrain_inputs(b), device) for b in bs])
                    tokens = sum(int(b["attention_mask"].sum()) for b in bs)
                else:
                    n = 512 if name == "tiny" else 256
                    seqs_ = synthetic_sentences(n, T, rng) if args.synthetic else sentences(tok, args.data, n, T)
                    batches = tuple(
                        [
                            (ours_on if g else lambda b, d, c: to(b, d))(b, device, case)
                            for b in finetune_batches(seqs_, 32, g, 0)
                        ]
                        for g in (True, False)
                    )
                    tokens = sum(len(s) for s in seqs_[: len(batches[0]) * 32])
                diff = parity(pair, batches[1][0])  # every key present (ours may drop a full mask)
                if args.compile:  # compiled in the warm-up round, which is not timed
                    pair.ours.compile()
                for prec in args.precision:
                    t_ours, t_theirs, peaks, gpu_mem = run_case(
                        case, pair, batches, prec, args.reps, device, args.rounds
                    )
                    ratio = statistics.median(b / a for a, b in zip(t_ours, t_theirs, strict=True))
                    sheet_mfu = ""
                    tokens_run = tokens * args.rounds
                    ours_tps, hf_tps = tokens_run / statistics.median(t_ours), tokens_run / statistics.median(t_theirs)
                    mfu_o = mfu_t = float("nan")
                    if case.startswith("pretrain"):
                        # the library's count (the one metrics.jsonl logs), per token of a full-length row
                        flops = tokens_run * train_flops_per_sequence(config, T, max(1, round(0.15 * T))) / T
                        mfu_o = statistics.median(flops / t / pk for t, pk in zip(t_ours, peaks, strict=True))
                        mfu_t = statistics.median(flops / t / pk for t, pk in zip(t_theirs, peaks, strict=True))
                        if prec in sheet:  # against the datasheet: the figure papers report
                            sheet_mfu = f" sheet MFU {flops / statistics.median(t_ours) / sheet[prec]:.1%}"
                    if device.type == "cuda":  # allocated in each library's timed steps, both models resident
                        mem = f"{gpu_mem[0]:,.0f}/{gpu_mem[1]:,.0f}MB"
                    else:  # the process's, both libraries together
                        mem = f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}MB"
                    print(
                        f"{name:<12} {case:<15} {T:>4} {prec:<5} {ratio:>7.2f}x {ours_tps:>11,.0f} {hf_tps:>10,.0f} "
                        f"{mfu_o:>8.0%} {mfu_t:>7.0%} {statistics.median(peaks) / 1e9:>6.0f} {mem:>9} "
                        f"{diff:>8.1e}{sheet_mfu}",
                        flush=True,
                    )
                    if args.json:
                        with args.json.open("a") as f:
                            f.write(
                                json.dumps(
                                    dict(
                                        preset=name,
                                        case=case,
                                        seq=T,
                                        precision=prec,
                                        speedup=ratio,
                                        ours_tokens_per_s=ours_tps,
                                        hf_tokens_per_s=hf_tps,
                                        ours_mfu=mfu_o,
                                        hf_mfu=mfu_t,
                                        matmul_peak=statistics.median(peaks),
                                        compiled=args.compile,
                                        device=str(device),
                                        max_diff_fp32=diff,
                                    )
                                )
                                + "\n"
                            )


if __name__ == "__main__":
    main()
