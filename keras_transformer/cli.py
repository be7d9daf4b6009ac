"""The `keras-transformer` command: runs the job its arguments name.

The arguments are `keras_transformer_cli.parser`'s. Each job lives in its
own module of `keras_transformer.jobs`. An input error (a bad option,
recipe, file or directory, or a run directory another process holds) is
one line on stderr and exit status 2; a training run whose loss became NaN
or infinite, one line and status 1; Ctrl-C, one line and status 130. `-v`
shows the traceback too, and TensorFlow's own logs. The executable's entry
point, `keras_transformer_cli.run`, parses the arguments and sets the
process's environment before it imports this module (and with it
TensorFlow), then calls `run_job`; `main` parses and runs in-process.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import sys
import threading

# The parser lives in the entry package, which reads the arguments before
# TensorFlow is imported; `build_parser` stays importable from here.
from keras_transformer_cli.parser import build_parser


def _fill_search_settings(args: argparse.Namespace) -> None:
    """`--beam` and `--alpha` left out: the model's recipe's settings."""
    from keras_transformer.jobs.run_dir import search_settings

    if args.beam is not None and args.alpha is not None:
        return  # (the recipe is not read)
    settings = search_settings(args.model)
    if args.beam is None:
        args.beam = settings["beam_size"]
    if args.alpha is None:
        args.alpha = settings["alpha"]


def main(argv: list[str] | None = None) -> int:
    """Parses `argv` and runs its job: the command in this process."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return run_job(args)


def run_job(args: argparse.Namespace) -> int:
    """Runs the job of `args` (parsed by `build_parser`, with a command).

    Returns the exit status: 0; 2 after one error line on stderr; 1 after
    one line when the loss of a training run became NaN or infinite (its
    last good state kept); 130 when a signal stopped training (its state
    saved, one line saying so) or Ctrl-C stopped another command.
    """
    _quiet(args.verbose)
    from keras_transformer.config import ConfigError
    from keras_transformer.training.interrupt import (
        TrainingDiverged,
        TrainingInterrupted,
    )

    # ImportError: an optional extra a command needs (its message says how to
    # install it), e.g. CTranslate2 for `export --format ctranslate2`.
    expected = (
        ConfigError,
        FileNotFoundError,
        FileExistsError,
        ValueError,
        OSError,
        ImportError,
    )
    noise = None if args.verbose else _StderrFilter()
    try:
        _run(args)
    except TrainingInterrupted as error:
        print(f"keras-transformer {args.command}: {error}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        if args.verbose:
            logging.getLogger(__name__).exception("Traceback:")
        again = (
            "; run the same command again to resume from the last saved state"
            if args.command in ("train", "demo")
            else ""
        )
        print(f"keras-transformer {args.command}: interrupted{again}", file=sys.stderr)
        return 130
    except TrainingDiverged as error:
        if args.verbose:
            logging.getLogger(__name__).exception("Traceback:")
        print(f"keras-transformer {args.command}: error: {error}", file=sys.stderr)
        return 1
    except expected as error:
        if args.verbose:
            logging.getLogger(__name__).exception("Traceback:")
        print(f"keras-transformer {args.command}: error: {error}", file=sys.stderr)
        return 2
    finally:
        if noise is not None:
            noise.close()
    return 0


class _StderrFilter:
    """Leaves out the lines of `NOISE` that C++ libraries write to stderr.

    SentencePiece, inside tensorflow-text's ops, logs a line each time an op
    loads a tokenizer ("normalizer.cc(51) LOG(INFO) precompiled_charsmap is
    empty"), past any Python logging setting. Everything written to file
    descriptor 2 goes through a pipe; a thread passes it on to the real
    stderr at once (progress bars included), except complete noise lines.
    """

    NOISE = re.compile(rb"^normalizer\.cc\(\d+\) LOG\(INFO\)")
    PREFIX = b"normalizer.cc("

    def __init__(self) -> None:
        sys.stderr.flush()
        self.stderr = os.dup(2)
        reader, writer = os.pipe()
        os.dup2(writer, 2)
        os.close(writer)
        self.thread = threading.Thread(target=self._pump, args=(reader,), daemon=True)
        self.thread.start()
        # Progress bars ask whether stderr is a terminal: the real one's answer.
        self.python_stderr = sys.stderr
        sys.stderr = _Stream(sys.stderr, os.isatty(self.stderr))

    def _pump(self, reader: int) -> None:
        pending = b""
        while chunk := os.read(reader, 1 << 16):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            out = b"".join(line + b"\n" for line in lines if not self.NOISE.match(line))
            # A partial line (a progress bar) goes on now, unless it may
            # become a noise line.
            head = pending[: len(self.PREFIX)]
            if pending and not self.PREFIX.startswith(head):
                out, pending = out + pending, b""
            if out:
                os.write(self.stderr, out)
        if pending:
            os.write(self.stderr, pending)
        os.close(reader)

    def close(self) -> None:
        """Restores stderr after passing on what is left."""
        sys.stderr.flush()
        sys.stderr = self.python_stderr
        os.dup2(self.stderr, 2)  # closes the pipe's writing end: the pump ends
        self.thread.join(timeout=5)
        os.close(self.stderr)


class _Stream:
    """A text stream that says whether it is a terminal as told."""

    def __init__(self, stream, tty: bool) -> None:
        self._stream, self._tty = stream, tty

    def isatty(self) -> bool:
        return self._tty

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _run(args: argparse.Namespace) -> None:
    # Each command imports only its own job.
    if args.command == "export" and args.format == "ctranslate2":
        _export_ctranslate2(args)
        return
    if args.command == "export" and args.quantization is not None:
        raise ValueError("--quantization is for --format ctranslate2")
    if args.command in ("translate", "evaluate", "export"):
        _fill_search_settings(args)
    if args.command == "translate":
        import tensorflow as tf

        from keras_transformer.jobs.translate import translate_files

        # Grappler's rewrites of the loaded graph took 0.6 s of the first
        # call (half of it) and saved no measurable time on 1000 sentences
        # (docs/benchmarks_archive.md); this process runs nothing else.
        tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
        translate_files(args.model, args.files, beam_size=args.beam, alpha=args.alpha)
    elif args.command == "demo":
        from keras_transformer.jobs.demo import run_demo

        # Progress (Keras writes it to stdout) on stderr; results on stdout.
        with contextlib.redirect_stdout(sys.stderr):
            result = run_demo(
                minutes=args.minutes,
                output_dir=args.output,
                seed=args.seed,
                overwrite=args.overwrite,
            )
        _print_demo(result, args.output)
    elif args.command == "train":
        from keras_transformer.jobs.train import train_command

        options = {
            "training.strategy": args.strategy,
            "output_dir": args.output,
            "data.data_dir": args.data_dir,
            "training.minutes": args.minutes,
            "training.steps": args.steps,
            "training.checkpoint_steps": args.checkpoint_steps,
            "training.mixed_precision": args.mixed_precision,
            "training.seed": args.seed,
        }
        with contextlib.redirect_stdout(sys.stderr):
            summary = train_command(
                args.config,
                {key: value for key, value in options.items() if value is not None},
                overwrite=args.overwrite,
                evaluate=not args.no_evaluate,
            )
        print(json.dumps(summary.get("test", {"steps": summary["steps"]}), indent=2))
    elif args.command == "prepare":
        from keras_transformer.jobs.prepare import prepare_command

        options = {
            "output_dir": args.output,
            "data.data_dir": args.data_dir,
            "data.prepared_dir": args.prepared_dir,
        }
        result = prepare_command(
            args.config,
            {key: value for key, value in options.items() if value is not None},
        )
        print(json.dumps(result, indent=2))
    elif args.command == "evaluate":
        from keras_transformer.jobs.evaluate import evaluate_files

        scores = evaluate_files(
            args.model, args.source, args.reference, args.beam, args.alpha
        )
        print(json.dumps(scores, indent=2))
    elif args.command == "export":
        from keras_transformer.jobs.export import export_translator

        path = export_translator(
            args.model,
            args.out,
            beam_size=args.beam,
            alpha=args.alpha,
            batch_tokens=args.batch_tokens,
            overwrite=args.overwrite,
        )
        print(f"Exported the translator to {path}")


def _export_ctranslate2(args: argparse.Namespace) -> None:
    """`export --format ctranslate2`: search settings are chosen when it runs."""
    from keras_transformer.jobs.export_ctranslate2 import export_ctranslate2

    given = [
        option
        for option, value in (
            ("--beam", args.beam),
            ("--alpha", args.alpha),
            ("--batch-tokens", args.batch_tokens),
        )
        if value is not None
    ]
    if given:
        raise ValueError(
            f"{', '.join(given)}: settings of the SavedModel; a CTranslate2 "
            "model takes its search settings when it translates"
        )
    path = export_ctranslate2(
        args.model, args.out, quantization=args.quantization, overwrite=args.overwrite
    )
    print(f"Exported the CTranslate2 model to {path}")


def _print_demo(result: dict, output_dir: str) -> None:
    summary, scores = result["summary"], result["scores"]
    print(
        f"\nTrained {summary['parameters']:,} parameters for {summary['steps']} steps "
        f"({summary['minutes']:.1f} minutes)."
    )
    print(
        f"Test set ({scores['sentences']} sentences, beam 4): "
        f"BLEU {scores['bleu']:.1f}, chrF {scores['chrf']:.1f}"
    )
    print(f"  {scores['bleu_signature']}\n  {scores['chrf_signature']}\n")
    for source, translation, reference in result["examples"]:
        mark = "=" if translation == reference else "≠"
        print(f"  {source}\n    -> {translation}\n    {mark}  {reference}")
    print("\nWrote:")
    for name, path in result["files"].items():
        print(f"  {name:24s} {path}")
    # The virtual environment the README makes is not activated: full paths.
    bin_dir = os.path.dirname(sys.executable)
    command = os.path.join(bin_dir, "keras-transformer")
    files = result["files"]
    print(
        "\nUse what was saved:\n"
        f"  echo 'at 3:45 PM' | {command} translate --model {output_dir}\n"
        f"  {command} evaluate --model {output_dir} "
        f"--source {files['test_source']} --reference {files['test_reference']}\n"
        f"  {saved_model_command(output_dir, 'three days ago')}"
    )


def saved_model_command(output_dir: str, sentence: str) -> str:
    """A shell line that translates `sentence` with TensorFlow alone.

    TensorFlow writes its start-up lines to stderr whatever its log level,
    so the line sends stderr to /dev/null.
    """
    program = (
        "import tensorflow as tf, tensorflow_text; "
        f"t = tf.saved_model.load('{output_dir}/translator'); "
        f"print(t(tf.constant(['{sentence}'])).numpy()[0].decode())"
    )
    return f'{sys.executable} -c "{program}" 2>/dev/null'


def _quiet(verbose: bool) -> None:
    """Only our own messages, unless `verbose`: no TensorFlow, Keras or
    SentencePiece chatter on stderr. (TensorFlow's C++ logs are silenced
    before it is imported, by `keras_transformer_cli.run`.)"""
    if not verbose:
        import absl.logging

        absl.logging.set_verbosity(absl.logging.ERROR)
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(message)s"
    )
    # The library's own progress messages are shown either way.
    logging.getLogger("keras_transformer").setLevel(logging.INFO)
