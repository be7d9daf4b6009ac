"""Validation BLEU of an ensemble of trained models, and of each alone.

An ensemble translates with the mean of its members' next-token
probabilities at every step of the same beam search (Sutskever et al.
2014, section 3.4; what Marian's and fairseq's decoders do with several
models). The members must share one vocabulary: runs of one recipe with
other seeds do (the tokenizer is trained on the data, not on the seed).

`Ensemble` gives the search what it asks of a model (`encode`, `decode`,
`init_cache`, `max_length`), so `keras_transformer.decoding.Translator`
runs it unchanged: the members' encoder outputs travel side by side on the
feature axis, and their per-layer caches one list after the other.

Usage (from the repository root):

    .venv/bin/python benchmarks/ensemble_bleu.py runs/a runs/b --data $D \\
        --out benchmarks/results/ensemble/a_b

writes `OUT.json`: each member's and the ensemble's sacrebleu BLEU and
chrF on Multi30k `val` (models named by their folders' names, not
paths), with the first member's beam size and length penalty. The
same folder twice is a check: its ensemble translates as the model
alone does.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DATA = os.path.join(REPO, "..", "shared", "data", "multi30k")


class Ensemble:
    """Members' mean next-token probability, as log-probabilities.

    Args:
        models: `Transformer`s over one vocabulary.
    """

    built = True

    def __init__(self, models):
        self.models = list(models)
        self.max_length = min(m.max_length for m in self.models)
        self.widths = [m.d_model for m in self.models]

    def encode(self, source_ids):
        import tensorflow as tf

        outputs = [m.encode(source_ids) for m in self.models]
        memory = tf.concat([o[0] for o in outputs], axis=-1)  # one dtype policy
        return memory, outputs[0][1]

    def _memories(self, memory):
        import tensorflow as tf

        return tf.split(memory, self.widths, axis=-1)

    def init_cache(self, memory, max_length):
        cache = []
        for model, part in zip(self.models, self._memories(memory), strict=True):
            cache += list(model.init_cache(part, max_length))
        return cache

    def decode(self, target_ids, memory, source_mask, cache=None, cache_index=None):
        import tensorflow as tf

        log_probs, new_cache, start = [], [], 0
        for model, part in zip(self.models, self._memories(memory), strict=True):
            if cache is None:
                logits = model.decode(target_ids, part, source_mask)
            else:
                layers = model.num_layers
                logits, own = model.decode(
                    target_ids,
                    part,
                    source_mask,
                    cache=cache[start : start + layers],
                    cache_index=cache_index,
                )
                new_cache += list(own)
                start += layers
            log_probs.append(tf.nn.log_softmax(logits))
        count = tf.math.log(float(len(self.models)))
        mean = tf.reduce_logsumexp(tf.stack(log_probs), axis=0) - count
        return mean if cache is None else (mean, new_cache)


def _digest(folder: Path) -> str:
    data = (folder / "tokenizer" / "tokenizer.model").read_bytes()
    return hashlib.sha256(data).hexdigest()


def translate_all(translator, sources, beam_size, alpha):
    import tensorflow as tf

    from keras_transformer.jobs.translate import CHUNK_LINES

    settings = (tf.constant(beam_size, tf.int32), tf.constant(alpha, tf.float32))
    out = []
    for i in range(0, len(sources), CHUNK_LINES):
        batch = tf.constant(sources[i : i + CHUNK_LINES], tf.string)
        result = translator.translate(batch, *settings)
        out += [t.decode("utf-8") for t in result["translations"].numpy()]
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("models", nargs="+", help="model folders (runs, snapshots)")
    parser.add_argument("--data", default=DEFAULT_DATA, help="Multi30k .gz folder")
    parser.add_argument("--out", required=True, help="OUT.json is written")
    args = parser.parse_args(argv)
    folders = [Path(m) for m in args.models]
    if len({_digest(f) for f in folders}) != 1:
        raise SystemExit("models: their tokenizers differ; an ensemble needs one")

    from keras_transformer.data import load_multi30k
    from keras_transformer.decoding import Translator
    from keras_transformer.evaluation import score_translations
    from keras_transformer.jobs.run_dir import load_trained, search_settings

    search = search_settings(folders[0])
    val = load_multi30k("val", args.data, "en", "de", download=False)
    sources, references = list(val.sources), list(val.targets)
    loaded = [load_trained(f) for f in folders]
    tokenizer = loaded[0][1]
    rows = []
    for folder, (model, _) in zip(folders, loaded, strict=True):
        hyps = translate_all(Translator(tokenizer, model), sources, **search)
        rows.append({"models": [folder.name], **score_translations(hyps, references)})
        print(folder, rows[-1]["bleu"], rows[-1]["chrf"], flush=True)
    ensemble = Ensemble([model for model, _ in loaded])
    hyps = translate_all(Translator(tokenizer, ensemble), sources, **search)
    scores = score_translations(hyps, references)
    rows.append({"models": [f.name for f in folders], **scores})
    print("ensemble", rows[-1]["bleu"], rows[-1]["chrf"], flush=True)
    result = {"validation": "multi30k val", "sentences": len(sources), **search}
    result["rows"] = rows
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out + ".json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
