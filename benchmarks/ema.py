"""Exponential moving averages of the weights against the recipe's final model,
on one training run.

An exponential moving average (EMA) of the weights, `average = m * average +
(1 - m) * weights` after every step, is what Marian (`--exponential-smoothing`)
and fairseq (`--ema-decay`) offer in place of, or beside, averaging saved
checkpoints. Keeping one changes nothing in training, so a single run gives
both models on the same trajectory: the recipe's own final model (chosen on
validation among checkpoint averages, `training.keep_best`) and the EMA of
each momentum `--momenta`. That pairs the comparison: the two seeds of a
recipe differ by more than the averages are likely to.

The script trains the recipe as `keras-transformer train --no-evaluate`
does, with one more callback in its `fit`, then writes each average as a
model folder `OUTPUT/ema/m_M/` (`model.keras`, the run's tokenizer) and
translates the validation split with the run's model and each average, with
the beam size and length penalty of the recipe. `OUT.json` gets their
sacrebleu BLEU and chrF, and the run's summary. The averages live only in
the process: a run stopped before its last step keeps none of them (start
it again in a new `--output`).

Usage (from the repository root; `D` holds the Multi30k `.gz` files):

    .venv/bin/python benchmarks/ema.py --config configs/multi30k_en_de.yaml \\
        --data-dir $D --steps 4823 --checkpoint-steps 150 --seed 0 \\
        --momenta 0.998 0.999 0.9995 --output runs/ema_s0 \\
        --out benchmarks/results/ema/ema_30min_seed0
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
from pathlib import Path

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))
sys.path.insert(0, REPO)


def ema_callback(momenta: list[float]):
    """A Keras callback keeping an EMA of the model's trainable weights per
    momentum, updated after every training batch (one compiled function)."""
    import keras
    import tensorflow as tf

    class EMA(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.averages = None  # momentum -> one variable per weight

        def on_train_begin(self, logs=None):
            if self.averages is not None:  # (a later phase of the same run)
                return
            weights = self.model.trainable_variables
            self.averages = {
                m: [tf.Variable(w.value, trainable=False) for w in weights]
                for m in momenta
            }

            @tf.function
            def update():
                for m, averages in self.averages.items():
                    for average, w in zip(averages, weights, strict=True):
                        average.assign(m * average + (1.0 - m) * w.value)

            self._update = update

        def on_train_batch_end(self, batch, logs=None):
            self._update()

        def write(self, run: Path) -> dict[float, Path]:
            """Each average as a model folder `run/ema/m_M`."""
            from keras_transformer.training.atomic import save_model_atomically

            model = self.model
            raw = [w.numpy() for w in model.trainable_variables]
            folders = {}
            for m, averages in self.averages.items():
                folder = run / "ema" / f"m_{m}"
                folder.mkdir(parents=True, exist_ok=True)
                for w, average in zip(model.trainable_variables, averages, strict=True):
                    w.assign(average)
                save_model_atomically(model, folder / "model.keras")
                shutil.copytree(
                    run / "tokenizer", folder / "tokenizer", dirs_exist_ok=True
                )
                folders[m] = folder
            for w, value in zip(model.trainable_variables, raw, strict=True):
                w.assign(value)
            return folders

    return EMA()


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="the recipe (YAML)")
    parser.add_argument("--data-dir", required=True, help="the corpus's files")
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--checkpoint-steps", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--momenta", type=float, nargs="+", default=[0.999])
    parser.add_argument("--output", required=True, help="the run's folder (new)")
    parser.add_argument("--out", required=True, help="OUT.json is written")
    args = parser.parse_args(argv)
    for m in args.momenta:
        if not 0 < m < 1:
            parser.error(f"--momenta: {m} is not between 0 and 1")
    if Path(args.output).exists():
        parser.error(f"--output {args.output}: exists; the averages need a new run")

    from keras_transformer_cli import use_memory_pool

    use_memory_pool()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    from bleu_by_steps import run_config, score_snapshot, validation_pairs

    import keras_transformer.jobs.train as train_job

    ema = ema_callback(args.momenta)
    fit = train_job._fit  # the job's `fit` loop, given one more callback

    def fit_with_ema(model, stream, done, per_epoch, valid, callbacks, budget, tr):
        return fit(model, stream, done, per_epoch, valid, [*callbacks, ema], budget, tr)

    train_job._fit = fit_with_ema
    summary = train_job.train_command(
        args.config,
        {
            "data.data_dir": args.data_dir,
            "training.steps": args.steps,
            "training.minutes": 100000,
            "training.checkpoint_steps": args.checkpoint_steps,
            "training.seed": args.seed,
            "output_dir": args.output,
        },
        evaluate=False,
    )
    if summary["steps"] != args.steps:
        raise SystemExit(f"the run ended at step {summary['steps']}, not {args.steps}")
    run = Path(args.output)
    models = {"run": run} | {f"ema {m}": f for m, f in ema.write(run).items()}
    config = run_config(run)
    search = {
        "beam_size": config.evaluation.beam_size,
        "alpha": config.evaluation.alpha,
    }
    sources, references = validation_pairs(run, "multi30k", args.data_dir)
    result = {"steps": summary["steps"], "summary": summary, "validation": {}}
    for name, folder in models.items():
        result["validation"][name] = score_snapshot(folder, sources, references, search)
        print(name, json.dumps(result["validation"][name]), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(f"{args.out}.json").write_text(
        json.dumps(result, indent=1) + "\n", encoding="utf-8"
    )
    return result


if __name__ == "__main__":
    main()
