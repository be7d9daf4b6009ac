"""Validation BLEU against training steps, from a run's models by step.

A run whose recipe sets `training.snapshot_steps` keeps the model of each
of those steps in `RUN/snapshots/step_S/` (the model a run of that length
would end with), and a finished run trained on keeps the model it had
finished with there too. Steps, unlike minutes, name the same models on any
machine. This script translates the validation split with each of them and
with the run's finished model, with the beam size and length penalty of
the run's recipe, and writes

- `OUT.json`: per model its step and folder, sacrebleu BLEU and chrF (with their
  signatures), and the run's validation perplexity at each epoch's end
  (from `summary.json`, placed on the step axis);
- `OUT.png`: validation BLEU against steps, the perplexity beside it.

`--dtype float32` decodes each model rebuilt in that dtype policy (a run
trained under "mixed_bfloat16" decodes in bfloat16 otherwise).

The validation split is Multi30k `val` (1014 sentences) from `--data`, or,
with `--valid run`, the validation split the run's own recipe names.

Usage (from the repository root):

    .venv/bin/keras-transformer train --config configs/multi30k_en_de.yaml \\
        --output runs/multi30k_en_de
    .venv/bin/python benchmarks/bleu_by_steps.py --run runs/multi30k_en_de \\
        --out benchmarks/results/bleu_by_steps

Without `--data`, Multi30k is read from `../shared/data/multi30k` beside the
repository; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DATA = os.path.join(REPO, "..", "shared", "data", "multi30k")
DEFAULT_OUT = os.path.join(REPO, "benchmarks", "results", "bleu_by_steps")


def _holds_a_model(folder: Path) -> bool:
    return (folder / "model.keras").is_file() and (folder / "tokenizer").is_dir()


def step_snapshots(run: str | os.PathLike) -> list[tuple[int, Path]]:
    """The run's models by step: its step snapshots, then the finished model.

    The finished model (the run's own `model.keras`) is added at the run's
    last step unless a snapshot of that step holds it already.
    """
    found = {}
    for info in Path(run, "snapshots").glob("step_*/snapshot.json"):
        if _holds_a_model(info.parent):
            step = json.loads(info.read_text(encoding="utf-8"))["step"]
            found[int(step)] = info.parent
    summary = Path(run, "summary.json")
    if summary.is_file() and _holds_a_model(Path(run)):
        record = json.loads(summary.read_text(encoding="utf-8"))
        if record.get("finished") and record.get("steps") not in found:
            found[int(record["steps"])] = Path(run)
    return sorted(found.items())


def run_config(run: str | os.PathLike):
    """The run's recipe (`config.yaml`), checked."""
    from keras_transformer.config import config_from_dict, read_yaml

    path = Path(run, "config.yaml")
    return config_from_dict(read_yaml(path), source=str(path))


def validation_pairs(
    run: str | os.PathLike, valid: str, data_dir: str | os.PathLike
) -> tuple[list[str], list[str]]:
    """Sources and references: Multi30k `val`, or the run's own (`"run"`).

    Raises:
        SystemExit: Multi30k is not in `data_dir`, or the run's recipe
            names no validation split.
    """
    config = run_config(run)
    if valid == "multi30k":
        from keras_transformer.data import load_multi30k

        d = config.data
        languages = (d.source_lang, d.target_lang)
        if d.corpus != "multi30k":
            languages = ("en", "de")
        try:
            corpus = load_multi30k("val", data_dir, *languages, download=False)
        except (FileNotFoundError, OSError) as error:
            raise SystemExit(
                f"--data {data_dir}: no Multi30k val split there ({error}); "
                "name the folder with --data, or score the run's own "
                "validation split with --valid run"
            ) from None
        return list(corpus.sources), list(corpus.targets)
    from keras_transformer.jobs.train import _pairs, load_splits

    split = load_splits(config, ("valid",))["valid"]
    if split is None:
        raise SystemExit(f"--run {run}: its recipe names no validation split")
    return _pairs(split)


def translator_in_policy(folder: Path, policy: str, beam_size: int, alpha: float):
    """The model in `folder` rebuilt in the dtype policy `policy`, as
    `load_translator`'s function (its `"translations"` only).

    The model is built anew from its config with `dtype=policy` and given
    the saved weights, so a model trained under "mixed_bfloat16" can be
    decoded in "float32", and the other way round.
    """
    import numpy as np
    import tensorflow as tf

    from keras_transformer.decoding import Translator
    from keras_transformer.jobs.run_dir import load_trained

    model, tokenizer = load_trained(folder)
    rebuilt = model.__class__.from_config({**model.get_config(), "dtype": policy})
    rebuilt((np.ones((1, 2), "int32"), np.ones((1, 2), "int32")))
    rebuilt.set_weights(model.get_weights())
    translator = Translator(tokenizer, rebuilt)
    settings = (tf.constant(beam_size, tf.int32), tf.constant(alpha, tf.float32))

    def translate(sentences: list[str]) -> dict:
        out = translator.translate(tf.constant(sentences, tf.string), *settings)
        return {
            "translations": [t.decode("utf-8") for t in out["translations"].numpy()]
        }

    return translate


def translations(
    folder: Path, sources: list[str], search: dict, dtype: str | None = None
) -> list[str]:
    """The snapshot's model's translations of `sources`, as `evaluate`
    translates (with `dtype`, the model rebuilt in that dtype policy)."""
    from keras_transformer.jobs.translate import CHUNK_LINES, load_translator

    if dtype:
        translate = translator_in_policy(folder, dtype, **search)
    else:
        translate = load_translator(folder, **search)
    hypotheses = []
    for i in range(0, len(sources), CHUNK_LINES):
        hypotheses += translate(sources[i : i + CHUNK_LINES])["translations"]
    return hypotheses


def score_snapshot(
    folder: Path,
    sources: list[str],
    references: list[str],
    search: dict,
    dtype: str | None = None,
) -> dict:
    """BLEU and chrF of the snapshot's model's `translations`."""
    from keras_transformer.evaluation import score_translations

    return score_translations(translations(folder, sources, search, dtype), references)


def perplexity_by_epoch(run: str | os.PathLike) -> list[dict]:
    """The validation perplexity at each epoch's end, with its step.

    The steps of an epoch come from the run's last training state (an
    epoch a budget cut short ends at the run's last step); `[]`
    when the run did not validate or keeps no state.
    """
    from keras_transformer.training.checkpoints import checkpoint_prefixes

    summary_file = Path(run, "summary.json")
    if not summary_file.is_file():
        return []
    summary = json.loads(summary_file.read_text(encoding="utf-8"))
    perplexities = summary.get("history", {}).get("val_perplexity", [])
    prefixes = checkpoint_prefixes(Path(run, "checkpoints"))
    if not perplexities or not prefixes:
        return []
    import tensorflow as tf

    record = tf.train.load_checkpoint(prefixes[-1]).get_tensor(
        "record/.ATTRIBUTES/VARIABLE_VALUE"
    )
    per_epoch = json.loads(record).get("batches_per_epoch")
    if not per_epoch:
        return []
    # A budget that stops inside an epoch logs it there, at the last step.
    last = summary.get("steps") or len(perplexities) * per_epoch
    return [
        {"epoch": i + 1, "step": min((i + 1) * per_epoch, last), "perplexity": p}
        for i, p in enumerate(perplexities)
    ]


def plot(result: dict, path: str) -> None:
    """Validation BLEU against steps; the perplexity on a second axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6.4, 4.0))
    steps = [row["step"] for row in result["snapshots"]]
    bleu = [row["bleu"] for row in result["snapshots"]]
    axis.plot(steps, bleu, "o-", color="tab:blue", label="BLEU (models by step)")
    axis.set_xlabel("optimizer steps")
    axis.set_ylabel(f"validation BLEU (beam {result['beam_size']})", color="tab:blue")
    axis.grid(alpha=0.3)
    if result["valid_perplexity"]:
        twin = axis.twinx()
        rows = result["valid_perplexity"]
        twin.plot(
            [r["step"] for r in rows],
            [r["perplexity"] for r in rows],
            ".--",
            color="tab:gray",
            label="perplexity (epoch ends)",
        )
        twin.set_yscale("log")  # (the first epochs' are ten times the rest)
        twin.set_ylabel("validation perplexity (log scale)", color="tab:gray")
    axis.set_title(f"{result['run']}: {result['validation']}")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def model_row(run: str | os.PathLike, step: int, folder: Path, scores: dict) -> dict:
    """A step model's JSON row (its folder relative to the run); printed."""
    model = Path(folder).relative_to(run).as_posix()
    print(f"step {step}: BLEU {scores['bleu']}, chrF {scores['chrf']}", file=sys.stderr)
    return {"step": step, "model": model, **scores}


def validation_header(run: str | os.PathLike, valid: str, sentences: int) -> dict:
    """The JSON's first entries: the run's name and what it was scored on."""
    return {
        "run": Path(run).resolve().name,
        "validation": "multi30k val" if valid == "multi30k" else "the run's own",
        "sentences": sentences,
    }


def write_result(out: str, result: dict) -> None:
    """`result` as `out.json`, its folder made."""
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    Path(out + ".json").write_text(json.dumps(result, indent=1) + "\n")


def bleu_by_steps(
    run: str,
    out: str = DEFAULT_OUT,
    valid: str = "multi30k",
    data_dir: str = DEFAULT_DATA,
    limit: int | None = None,
    dtype: str | None = None,
) -> dict:
    """Scores every model of `run` by step; writes `out.json` and `out.png`.

    With `dtype` (a Keras dtype policy), each model is rebuilt in that
    policy before it translates, and the JSON records it.

    Returns:
        What `out.json` holds.
    """
    from keras_transformer.jobs.run_dir import search_settings

    snapshots = step_snapshots(run)
    if not snapshots:
        raise SystemExit(
            f"--run {run}: no finished model and no snapshots/step_S/ with a "
            "model (train with training.snapshot_steps set)"
        )
    sources, references = validation_pairs(run, valid, data_dir)
    sources, references = sources[:limit], references[:limit]
    search = search_settings(snapshots[0][1])
    rows = [
        model_row(
            run,
            step,
            folder,
            score_snapshot(folder, sources, references, search, dtype),
        )
        for step, folder in snapshots
    ]
    result = {
        **validation_header(run, valid, len(sources)),
        **search,
        **({"dtype": dtype} if dtype else {}),
        "snapshots": rows,
        "valid_perplexity": perplexity_by_epoch(run),
    }
    write_result(out, result)
    plot(result, out + ".png")
    return result


def add_validation_arguments(parser: argparse.ArgumentParser) -> None:
    """`--run`, and which validation sentences: `--valid`, `--data`, `--limit`."""
    parser.add_argument("--run", required=True, help="a finished training run")
    parser.add_argument(
        "--valid",
        choices=("multi30k", "run"),
        default="multi30k",
        help="Multi30k val from --data, or the run's own validation split",
    )
    parser.add_argument("--data", default=DEFAULT_DATA, help="Multi30k directory")
    parser.add_argument(
        "--limit", type=int, help="score only the first N validation sentences"
    )


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_validation_arguments(parser)
    parser.add_argument(
        "--out", default=DEFAULT_OUT, help="writes OUT.json and OUT.png"
    )
    parser.add_argument(
        "--dtype",
        choices=("float32", "mixed_float16", "mixed_bfloat16"),
        help="decode each model rebuilt in this dtype policy (default: the "
        "policy it was trained in)",
    )
    args = parser.parse_args(argv)
    return bleu_by_steps(
        args.run, args.out, args.valid, args.data, args.limit, args.dtype
    )


if __name__ == "__main__":
    main()
