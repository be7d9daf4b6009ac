"""The `keras-transformer` command: parses arguments, calls `pipeline`."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

_COMMANDS_HELP = """\
commands:
  demo        train a small model on the built-in corpus, score, save, plot
  train       train from a YAML recipe (see configs/)
  evaluate    BLEU and chrF of a trained model on a source/reference pair
  translate   translate lines from stdin or files to stdout
  export      write the string-to-string SavedModel
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="keras-transformer",
        description="Train, evaluate and use Transformer translation models.",
        epilog=_COMMANDS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show TensorFlow's and the library's info logs",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser("demo", help="the main job on the built-in corpus")
    demo.add_argument(
        "--minutes",
        type=float,
        default=5.0,
        help="training budget in minutes (default: 5)",
    )
    demo.add_argument(
        "--output",
        default="demo_output",
        help="directory for the model, plots and scores",
    )
    demo.add_argument("--seed", type=int, default=0)

    train = sub.add_parser("train", help="train from a YAML recipe")
    train.add_argument("--config", required=True, help="the YAML recipe")
    train.add_argument(
        "--strategy",
        choices=["default", "mirrored", "multi_worker"],
        help="overrides training.strategy",
    )
    train.add_argument("--output", help="overrides output_dir")
    train.add_argument("--minutes", type=float, help="overrides training.minutes")
    train.add_argument("--steps", type=int, help="overrides training.steps")
    train.add_argument(
        "--no-evaluate",
        action="store_true",
        help="skip scoring the test split after training",
    )

    evaluate = sub.add_parser("evaluate", help="corpus BLEU and chrF")
    evaluate.add_argument("--model", required=True, help="trained model directory")
    evaluate.add_argument("--source", required=True, help="source sentences file")
    evaluate.add_argument("--reference", required=True, help="reference file")
    _search_arguments(evaluate)

    translate = sub.add_parser("translate", help="translate lines to stdout")
    translate.add_argument("--model", required=True, help="trained model directory")
    translate.add_argument("files", nargs="*", help="input files (default: stdin)")
    _search_arguments(translate)

    export = sub.add_parser("export", help="write the string-to-string SavedModel")
    export.add_argument("--model", required=True, help="trained model directory")
    export.add_argument("--out", required=True, help="SavedModel directory")
    _search_arguments(export)
    export.add_argument(
        "--batch-tokens",
        type=int,
        default=4096,
        help="source tokens per beam-search batch (default 4096)",
    )
    return parser


def _search_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--beam", type=int, default=4, help="beam size; 1 is greedy (default 4)"
    )
    parser.add_argument(
        "--alpha", type=float, default=0.6, help="length penalty alpha (default 0.6)"
    )


def main(argv: list[str] | None = None) -> int:
    use_memory_pool()
    args = build_parser().parse_args(argv)
    _COMMAND["name"] = args.command
    if args.command is None:
        build_parser().print_help()
        return 2
    _quiet_tensorflow(args.verbose)
    try:
        if args.command == "translate":
            # Imported late: TensorFlow's start-up logging is silenced first,
            # and with an exported translator, nothing else is needed.
            from keras_transformer.jobs.translate import translate_files

            translate_files(
                args.model, args.files, beam_size=args.beam, alpha=args.alpha
            )
            return 0
        from keras_transformer import pipeline

        if args.command == "demo":
            _print_demo(
                pipeline.run_demo(
                    minutes=args.minutes, output_dir=args.output, seed=args.seed
                ),
                args.output,
            )
        elif args.command == "train":
            summary = pipeline.train_command(
                args.config,
                strategy=args.strategy,
                output_dir=args.output,
                minutes=args.minutes,
                steps=args.steps,
                evaluate=not args.no_evaluate,
            )
            print(json.dumps(summary.get("test", summary.get("steps")), indent=2))
        elif args.command == "evaluate":
            from keras_transformer.jobs.evaluate import evaluate_files

            scores = evaluate_files(
                args.model,
                args.source,
                args.reference,
                beam_size=args.beam,
                alpha=args.alpha,
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
            )
            print(f"Exported the translator to {path}")
    except (FileNotFoundError, ValueError) as error:
        print(f"keras-transformer {args.command}: error: {error}", file=sys.stderr)
        return 1
    return 0


def run() -> None:
    """The `keras-transformer` executable: `main`, then the process exits.

    After `translate`, with its output flushed, the process leaves without
    the interpreter's teardown: tearing TensorFlow down took 0.9 s, a sixth
    of a one-line translation from start to end (docs/benchmarks.md).
    """
    code = main()
    if _COMMAND.get("name") == "translate":
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


_COMMAND: dict[str, str] = {}  # the command `main` last ran


def use_memory_pool() -> None:
    """Sets `TF_CPU_ALLOCATOR_USE_BFC=true` unless the environment sets it.

    TensorFlow then keeps the memory of freed tensors in a pool for the next
    ones instead of returning it to the system. A training step allocates
    the same large tensors every time (the logits alone are tokens x
    vocabulary floats), and without the pool each costs a page fault per
    4 KiB page: an addition over 2048 x 8000 floats took 29 ms without it
    and 6 ms with it (docs/benchmarks.md). TensorFlow reads the variable
    when it creates its first CPU tensor, so this runs before anything
    imports TensorFlow. The library itself sets nothing: a program that
    imports it sets the variable itself if it wants the pool.
    """
    os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")


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
    print(
        "\nTranslate with what was saved:\n"
        f"  echo 'at 3:45 PM' | keras-transformer translate --model {output_dir}\n"
        f"  keras-transformer evaluate --model {output_dir} "
        "--source SRC --reference REF\n"
        '  python -c "import tensorflow as tf, tensorflow_text; '
        f"t = tf.saved_model.load('{output_dir}/translator'); "
        "print(t(tf.constant(['three days ago'])))\""
    )


def _quiet_tensorflow(verbose: bool) -> None:
    if not verbose:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        # TensorFlow's C++ start-up lines ignore TF_CPP_MIN_LOG_LEVEL: import
        # it with the process's stderr pointed at /dev/null.
        saved = os.dup(2)
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, 2)
            import tensorflow  # noqa: F401
        finally:
            os.dup2(saved, 2)
            os.close(devnull)
            os.close(saved)
        import absl.logging

        absl.logging.set_verbosity(absl.logging.ERROR)
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(message)s"
    )
    # The library's own progress messages are shown either way.
    logging.getLogger("keras_transformer").setLevel(logging.INFO)


if __name__ == "__main__":
    run()
