"""The `keras-transformer` command's arguments: argparse alone.

Built and read before anything of `keras_transformer` (and so Keras and
TensorFlow) is imported: `--help`, `--version` and usage errors answer at
once, and the entry point (`keras_transformer_cli.run`) knows from the
parsed `-v` how to set TensorFlow's environment before importing it.
"""

import argparse
import math

# CTranslate2's weight types (`ctranslate2.specs.model_spec.ACCEPTED_MODEL_TYPES`).
CTRANSLATE2_QUANTIZATIONS = (
    "int8",
    "int8_float32",
    "int8_float16",
    "int8_bfloat16",
    "int16",
    "float16",
    "bfloat16",
    "float32",
)

# The installed distribution (setup.cfg's `[metadata] name`), whose version
# `--version` shows without importing the library.
DISTRIBUTION = "keras-transformer-mt"


def version() -> str:
    """The installed distribution's version; a placeholder if not installed."""
    import importlib.metadata  # ~50 ms: only when `--version` asks for it.

    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "(version unknown: not installed)"


class _Version(argparse.Action):
    """`--version`, with the version looked up only when asked for."""

    def __init__(self, option_strings, dest, help=None):
        super().__init__(
            option_strings,
            dest=argparse.SUPPRESS,
            default=argparse.SUPPRESS,
            nargs=0,
            help=help,
        )

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{parser.prog} {version()}")
        parser.exit()


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return value


def _number(text: str, allow_zero: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    bound = ">= 0" if allow_zero else "> 0"
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(
            f"expected a finite number {bound}, got {text}"
        )
    if not (value >= 0 if allow_zero else value > 0):
        raise argparse.ArgumentTypeError(f"expected a number {bound}, got {text}")
    return value


def _positive_float(text: str) -> float:
    return _number(text, allow_zero=False)


def _alpha(text: str) -> float:
    return _number(text, allow_zero=True)


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line (`--help` shows the usage)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    verbose = {
        "action": "store_true",
        "help": "show tracebacks, TensorFlow's logs and the library's info logs",
    }
    parser = _Parser(
        prog="keras-transformer",
        description="Train, evaluate and use Transformer translation models.",
    )
    parser.add_argument("-v", "--verbose", **verbose)
    # `-v` after the command too. No default there: a command's parser would
    # overwrite the `-v` given before the command with it.
    common = _Parser(add_help=False)
    common.add_argument("-v", "--verbose", default=argparse.SUPPRESS, **verbose)
    parser.add_argument("--version", action=_Version, help="show the version and exit")
    sub = parser.add_subparsers(
        dest="command",
        metavar="COMMAND",
        title="commands",
        parser_class=_Parser,
        help="the job to run (COMMAND --help for its options)",
    )

    demo = sub.add_parser(
        "demo",
        parents=[common],
        help="train a small model on the built-in corpus, score, save, plot",
    )
    demo.add_argument(
        "--minutes",
        type=_positive_float,
        default=5.0,
        help="training budget in minutes (default: 5)",
    )
    demo.add_argument(
        "--output",
        default="demo_output",
        help="directory for the model, plots and scores (default: demo_output)",
    )
    demo.add_argument("--seed", type=int, default=0, help="seed (default: 0)")
    demo.add_argument(
        "--overwrite", action="store_true", help="start over in a finished demo"
    )

    train = sub.add_parser(
        "train", parents=[common], help="train from a YAML recipe (see configs/)"
    )
    train.add_argument("--config", required=True, help="the YAML recipe")
    train.add_argument(
        "--strategy",
        choices=["default", "mirrored", "multi_worker"],
        help="overrides training.strategy",
    )
    train.add_argument("--output", help="overrides output_dir")
    train.add_argument(
        "--data-dir",
        help="overrides data.data_dir: a local copy of the corpus's files",
    )
    train.add_argument(
        "--minutes", type=_positive_float, help="overrides training.minutes"
    )
    train.add_argument("--steps", type=_positive_int, help="overrides training.steps")
    train.add_argument(
        "--checkpoint-steps",
        type=_positive_int,
        help="overrides training.checkpoint_steps: a checkpoint every N steps, "
        "so a run by steps averages the same ones on any machine",
    )
    train.add_argument(
        "--mixed-precision",
        choices=["float32", "mixed_float16", "mixed_bfloat16", "auto"],
        help="overrides training.mixed_precision (auto: mixed_bfloat16 where "
        "the GPUs or the CPU compute bfloat16 in hardware, float32 elsewhere)",
    )
    train.add_argument(
        "--seed",
        type=int,
        help="overrides training.seed (weights, dropout, data order)",
    )
    train.add_argument(
        "--overwrite",
        action="store_true",
        help="start over in an output directory that holds a run",
    )
    train.add_argument(
        "--no-evaluate",
        action="store_true",
        help="skip scoring the test split after training",
    )

    prepare = sub.add_parser(
        "prepare",
        parents=[common],
        help="train a recipe's tokenizer and tokenize its training corpus "
        "into shards, once (train reuses them)",
    )
    prepare.add_argument("--config", required=True, help="the YAML recipe")
    prepare.add_argument("--output", help="overrides output_dir")
    prepare.add_argument(
        "--data-dir",
        help="overrides data.data_dir: a local copy of the corpus's files",
    )
    prepare.add_argument("--prepared-dir", help="overrides data.prepared_dir")

    evaluate = sub.add_parser(
        "evaluate",
        parents=[common],
        help="BLEU and chrF of a trained model on a source/reference pair",
    )
    evaluate.add_argument("--model", required=True, help="trained model directory")
    evaluate.add_argument(
        "--source", required=True, help="source sentences, one per line (.gz too)"
    )
    evaluate.add_argument(
        "--reference", required=True, help="reference translations, line by line"
    )
    _search_arguments(evaluate)

    translate = sub.add_parser(
        "translate", parents=[common], help="translate lines from files or stdin"
    )
    translate.add_argument("--model", required=True, help="trained model directory")
    translate.add_argument("files", nargs="*", help="input files (default: stdin)")
    _search_arguments(translate)

    export = sub.add_parser(
        "export",
        parents=[common],
        help="write the string-to-string SavedModel, or a CTranslate2 model",
    )
    export.add_argument("--model", required=True, help="trained model directory")
    export.add_argument("--out", required=True, help="directory to write")
    export.add_argument(
        "--format",
        choices=["savedmodel", "ctranslate2"],
        default="savedmodel",
        help="a TensorFlow SavedModel translator (default), or a CTranslate2 "
        "model (pip install 'keras-transformer-mt[ctranslate2]')",
    )
    _search_arguments(export)
    export.add_argument(
        "--batch-tokens",
        type=_positive_int,
        default=None,
        help="source tokens per beam-search batch (default: 16384 / beam size)",
    )
    export.add_argument(
        "--quantization",
        choices=CTRANSLATE2_QUANTIZATIONS,
        default=None,
        help="CTranslate2's weight type (default: float32); ctranslate2 only",
    )
    export.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an earlier export of the same format at --out",
    )
    return parser


def _search_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--beam",
        type=_positive_int,
        default=None,
        help="beam size; 1 is greedy search (default: the model's recipe's, else 4)",
    )
    parser.add_argument(
        "--alpha",
        type=_alpha,
        default=None,
        help="length penalty (default: the model's recipe's, else 0.6)",
    )
