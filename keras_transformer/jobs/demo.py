"""`keras-transformer demo`: the main job, on the built-in corpus.

Trains the "tiny" Transformer on the built-in English→German corpus for a
few minutes (the `train` job, so a rerun resumes an interrupted demo and
leaves a finished one as it is), then translates the test split with beam
search, scores it with sacrebleu, writes the split as text files (for the
`evaluate` command it prints), the attention and positional-encoding plots,
and the summary.
"""

from __future__ import annotations

import logging
from pathlib import Path

import tensorflow as tf

from keras_transformer import data
from keras_transformer.config import config_from_dict
from keras_transformer.decoding import Translator, beam_search
from keras_transformer.evaluation import score_translations
from keras_transformer.jobs.run_dir import (
    DEMO_ENTRIES,
    MODEL_FILE,
    TOKENIZER_DIR,
    TRANSLATOR_DIR,
    load_trained,
    read_summary,
    record_entries,
    run_lock,
    write_summary,
    write_text,
)
from keras_transformer.jobs.train import train_from_config
from keras_transformer.jobs.translate import translate_sentences

logger = logging.getLogger(__name__)

TEST_SOURCE, TEST_REFERENCE = "test.en", "test.de"


def demo_config(minutes: float, output_dir: str, seed: int):
    """The demo's recipe."""
    return config_from_dict(
        {
            "data": {"corpus": "builtin", "max_length": 48, "seed": seed},
            "tokenizer": {"vocab_size": 1000},
            "model": {"preset": "tiny"},
            "training": {
                "minutes": minutes,
                "token_budget": 2048,
                "warmup_steps": 250,
                "lr_scale": 1.0,
                "average_last": 0,
                # Every second goes to training steps; the test split is
                # scored after training.
                "validate": False,
                "seed": seed,
            },
            "output_dir": output_dir,
        },
        source="demo",
    )


def run_demo(
    minutes: float = 5.0,
    output_dir: str = "demo_output",
    seed: int = 0,
    verbose: int | str = "auto",
    test_sentences: int | None = None,
    overwrite: bool = False,
) -> dict:
    """The main job: a small translator trained on the built-in corpus.

    Args:
        minutes: training budget.
        output_dir: where everything is written.
        seed: seed of the corpus split and of training.
        verbose: Keras `fit` verbosity.
        test_sentences: score only the first this many test sentences (all
            1000 by default).
        overwrite: start over in a directory that holds a demo.

    Returns:
        `{"summary", "scores", "examples", "files"}`: the training summary,
        test scores, `(source, translation, reference)` triples, and the
        paths written.
    """
    out = Path(output_dir)
    config = demo_config(minutes, str(out), seed)
    with run_lock(out):  # the demo's files too: one process at a time
        return _demo(config, out, seed, verbose, test_sentences, overwrite)


def _demo(config, out: Path, seed, verbose, test_sentences, overwrite) -> dict:
    done = read_summary(out).get("demo")
    summary = train_from_config(
        config, verbose=verbose, overwrite=overwrite, evaluate=False
    )
    if done and not overwrite:
        logger.warning("%s holds a finished demo; showing its results.", out)
        return {**_with_paths(done, out), "summary": summary}

    model, tokenizer = load_trained(out)
    test = data.builtin_corpus("test", seed=seed)
    sources, references = list(test.sources), list(test.targets)
    if test_sentences is not None:
        sources, references = sources[:test_sentences], references[:test_sentences]
    logger.info("Translating %d test sentences with beam search.", len(sources))
    translator = Translator(tokenizer, model, beam_size=4, alpha=0.6)
    hypotheses = translate_sentences(translator, sources, progress=verbose != 0)
    scores = score_translations(hypotheses, references)
    record_entries(out, *DEMO_ENTRIES)
    for name, lines in ((TEST_SOURCE, sources), (TEST_REFERENCE, references)):
        write_text(out / name, "".join(line + "\n" for line in lines))
    # Names inside the run: it is the same run wherever it is moved.
    files = {
        "model": MODEL_FILE,
        "tokenizer": TOKENIZER_DIR,
        "translator": TRANSLATOR_DIR,
        "test_source": TEST_SOURCE,
        "test_reference": TEST_REFERENCE,
        **_plots(model, tokenizer, sources[0], out),
    }
    result = {
        "scores": scores,
        "examples": list(zip(sources, hypotheses, references, strict=True))[:8],
        "files": files,
    }
    write_summary(out, {"test": scores, "demo": result})
    return {**_with_paths(result, out), "summary": summary}


def _with_paths(result: dict, out: Path) -> dict:
    """`result` with its files as paths in `out` (where the run is now)."""
    # (Earlier versions kept the paths as spelled then: their names remain.)
    files = {key: str(out / Path(name).name) for key, name in result["files"].items()}
    return {**result, "files": files}


def _plots(model, tokenizer, sentence: str, out: Path) -> dict:
    from keras_transformer.visualization import (
        plot_attention_heads,
        plot_positional_encoding,
        save_figure,
    )

    source = tokenizer.tokenize(tf.constant([sentence])).to_tensor()
    source = tf.concat(
        [tf.cast(source, tf.int32), tf.fill([1, 1], data.END_ID)], axis=1
    )
    ids = beam_search(model, source)["ids"][0].numpy()
    ids = ids[: list(ids).index(data.END_ID) + 1] if data.END_ID in ids else ids
    target_in = tf.constant([[data.START_ID, *ids[:-1]]], tf.int32)
    _, scores = model((source, target_in), return_attention_scores=True)
    source_tokens = tokenizer.tokens(source[0].numpy())
    target_tokens = tokenizer.tokens(ids)
    figures = {
        "cross_attention_png": plot_attention_heads(
            scores["decoder_cross"][-1][0],
            target_tokens,
            source_tokens,
            title="Encoder-decoder attention, last decoder layer",
        ),
        "encoder_attention_png": plot_attention_heads(
            scores["encoder"][-1][0],
            source_tokens,
            source_tokens,
            title="Encoder self-attention, last layer",
        ),
        "positional_encoding_png": plot_positional_encoding(
            length=model.max_length, depth=model.d_model
        ),
    }
    names = {key: key.removesuffix("_png") + ".png" for key in figures}
    for key, figure in figures.items():
        save_figure(figure, out / names[key])
    return names
