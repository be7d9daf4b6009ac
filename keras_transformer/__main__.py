"""`python -m keras_transformer` runs the command line."""

import sys

from keras_transformer.cli import main

sys.exit(main())
