"""Write fixtures/trl/ with TRL's real GRPOTrainer: a tiny random model, CPU, no downloads.

Each run trains a 2-layer Qwen2 (hidden 32, random init) with a word-level tokenizer built here
from a few strings, on an in-memory prompt set with a toy reward, and keeps what TRL writes:
the checkpoints' `trainer_state.json` (weights and optimizer state are dropped: they are not
logs), the final `trainer_state.json` where the run calls `trainer.save_state()` (it adds the
`train_runtime`/`train_loss` summary entry), the TensorBoard event file of
`report_to=["tensorboard"]`, and everything the process printed (stdout + stderr, as
`python train.py > train.log 2>&1` would keep it) as `train.log`.

Runs (each honest: the knob named is all that differs from a plain GRPO setup):
- `grpo_healthy`: 16 steps, room to finish (`max_completion_length=64`), a reward for short
  answers holding "good"; eval every 8 steps; `save_state()` at the end; tqdm on, so the
  printed dicts are the progress callback's (floats as `.4g` strings, behind `\\r` bars).
- `grpo_truncated`: 12 steps, `max_completion_length=3`: almost no completion ends before the
  cap, so `completions/clipped_ratio` stays near 1 and the reward (given only to completions that
  end) is mostly 0 in every group (`frac_reward_zero_std` high). tqdm off (`disable_tqdm=True`),
  and the printer is transformers 4.x's `PrinterCallback` (`print(logs)`: raw floats, where 5.x
  prints `.4g` strings), so the fixtures hold both printed formats; checkpoints only (no
  `save_state()`), 6 and 12, so "the latest" must sort numerically.

Needs torch, trl, transformers, datasets, tensorboard (not logscope's dependencies), e.g.:
    python -m venv /work/trlvenv && /work/trlvenv/bin/pip install torch==2.13.0 \\
        trl transformers datasets tensorboard
    HF_HUB_OFFLINE=1 /work/trlvenv/bin/python scripts/make_trl_fixtures.py
The versions used are written to fixtures/trl/VERSIONS.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "fixtures" / "trl"
WORDS = ["good", "bad", "yes", "no", "maybe", "the", "a", "cat", "dog", "sat", "ran", "on", "mat"]
WORDS += ["fast", "slow", "red", "blue", "one", "two", "three"]
PROMPTS = [
    "the cat sat on the mat",
    "a dog ran fast",
    "one two three",
    "red blue red",
    "is the cat good",
    "say yes or no",
    "the dog sat slow",
    "maybe the mat is blue",
]

RUNS: dict[str, dict[str, Any]] = {
    "grpo_healthy": {
        "max_steps": 16,
        "max_completion_length": 64,
        "learning_rate": 3e-3,
        "save_steps": 16,
        "eval_steps": 8,
        "disable_tqdm": False,
        "reward": "short_good",
        "save_state": True,
    },
    "grpo_truncated": {
        "max_steps": 12,
        "max_completion_length": 3,
        "learning_rate": 1e-3,
        "save_steps": 6,
        "eval_steps": None,
        "disable_tqdm": True,
        "reward": "ended_good",
        "save_state": False,
    },
}


def build_tokenizer() -> Any:
    """A word-level fast tokenizer over WORDS with pad/eos/bos/unk, built in memory."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<eos>", "<bos>", "<unk>"]
    vocab = {tok: i for i, tok in enumerate(specials + WORDS + ["is", "or", "say"])}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<pad>",
        eos_token="<eos>",
        bos_token="<bos>",
        unk_token="<unk>",
        padding_side="left",
    )


def build_model(tokenizer: Any) -> Any:
    """A randomly initialised 2-layer Qwen2 with hidden size 32."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )
    return Qwen2ForCausalLM(config)


def short_good(completions: list[str], completion_ids: list[list[int]], **_: Any) -> list[float]:
    """1 per "good", less 0.05 per token: short answers that say good."""
    return [
        c.split().count("good") - 0.05 * len(ids)
        for c, ids in zip(completions, completion_ids, strict=True)
    ]


def make_ended_good(eos_id: int) -> Any:
    def ended_good(
        completion_ids: list[list[int]], completions: list[str], **_: Any
    ) -> list[float]:
        """1 for a completion that ended (eos) and holds "good", else 0."""
        return [
            float(bool(ids) and ids[-1] == eos_id and "good" in c.split())
            for c, ids in zip(completions, completion_ids, strict=True)
        ]

    return ended_good


def transformers4_printer() -> Any:
    """transformers 4.x's PrinterCallback (its `on_log` verbatim: floats printed unformatted)."""
    from transformers import TrainerCallback

    class Transformers4Printer(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
            _ = logs.pop("total_flos", None)
            if state.is_local_process_zero:
                print(logs)

    return Transformers4Printer()


def train(name: str, output_dir: Path) -> None:
    """One GRPO run (child process): its prints are what the parent keeps as train.log."""
    import torch
    from datasets import Dataset
    from transformers import PrinterCallback, set_seed
    from trl import GRPOConfig, GRPOTrainer

    spec = RUNS[name]
    set_seed(0)
    torch.set_num_threads(1)
    tokenizer = build_tokenizer()
    # TRL loads the reference model from a path (beta > 0), so the random model is saved first
    init = output_dir.parent / "init-model"
    build_model(tokenizer).save_pretrained(init)
    tokenizer.save_pretrained(init)
    reward = (
        short_good if spec["reward"] == "short_good" else make_ended_good(tokenizer.eos_token_id)
    )
    train_set = Dataset.from_dict({"prompt": PROMPTS * 8})
    eval_set = Dataset.from_dict({"prompt": PROMPTS[:4]})
    config = GRPOConfig(
        output_dir=str(output_dir),
        use_cpu=True,
        bf16=False,
        seed=0,
        max_steps=spec["max_steps"],
        learning_rate=spec["learning_rate"],
        per_device_train_batch_size=8,
        per_device_eval_batch_size=8,
        num_generations=4,
        max_completion_length=spec["max_completion_length"],
        beta=0.04,
        temperature=1.0,
        gradient_checkpointing=False,
        logging_steps=1,
        save_steps=spec["save_steps"],
        save_only_model=True,
        eval_strategy="steps" if spec["eval_steps"] else "no",
        eval_steps=spec["eval_steps"],
        report_to=["tensorboard"],
        disable_tqdm=spec["disable_tqdm"],
        dataloader_num_workers=0,
    )
    trainer = GRPOTrainer(
        model=str(init),
        reward_funcs=reward,
        args=config,
        train_dataset=train_set,
        eval_dataset=eval_set if spec["eval_steps"] else None,
        processing_class=tokenizer,
    )
    if spec["disable_tqdm"]:
        trainer.remove_callback(PrinterCallback)
        trainer.add_callback(transformers4_printer())
    trainer.train()
    if spec["save_state"]:
        trainer.save_state()


def versions() -> dict[str, str]:
    import datasets
    import tensorboard
    import tokenizers
    import torch
    import transformers
    import trl

    mods = (torch, trl, transformers, datasets, tokenizers, tensorboard)
    return {m.__name__: m.__version__ for m in mods} | {"python": sys.version.split()[0]}


def keep(name: str, work: Path, log: bytes) -> None:
    """Copy what is a log out of the run's output dir into fixtures/trl/<name>/."""
    dest = OUT / name
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    (dest / "train.log").write_bytes(log)
    if (work / "trainer_state.json").exists():
        shutil.copy2(work / "trainer_state.json", dest / "trainer_state.json")
    for ckpt in sorted(work.glob("checkpoint-*")):
        (dest / ckpt.name).mkdir()
        shutil.copy2(ckpt / "trainer_state.json", dest / ckpt.name / "trainer_state.json")
    for event in (work / "runs").rglob("events.out.tfevents.*"):
        target = dest / "runs" / event.relative_to(work / "runs")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(event, target)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--output-dir", help=argparse.SUPPRESS)
    parser.add_argument("runs", nargs="*", default=list(RUNS), help="which runs (default: all)")
    args = parser.parse_args()
    if args.child:
        train(args.child, Path(args.output_dir))
        return
    OUT.mkdir(parents=True, exist_ok=True)
    env = os.environ | {
        "HF_HUB_OFFLINE": "1",
        "PYTHONUNBUFFERED": "1",  # keep prints and progress bars in the order they happened
        "TOKENIZERS_PARALLELISM": "false",
        "TQDM_NCOLS": "100",
    }
    for name in args.runs:
        with tempfile.TemporaryDirectory(prefix=f"trl-{name}-") as tmp:
            work = Path(tmp) / "out"
            env["TENSORBOARD_LOGGING_DIR"] = str(work / "runs" / name)
            cmd = [sys.executable, __file__, "--child", name, "--output-dir", str(work)]
            done = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            if done.returncode:
                sys.stdout.buffer.write(done.stdout[-4000:])
                raise SystemExit(f"{name}: training failed ({done.returncode})")
            keep(name, work, done.stdout.replace(tmp.encode(), b"/tmp/trl-run"))
        print(f"wrote {OUT / name}")
    made = {
        "versions": versions(),
        "command": "HF_HUB_OFFLINE=1 /work/trlvenv/bin/python scripts/make_trl_fixtures.py",
        "runs": RUNS,
    }
    (OUT / "VERSIONS.json").write_text(json.dumps(made, indent=2) + "\n")


if __name__ == "__main__":
    main()
