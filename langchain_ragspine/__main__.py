"""``python -m langchain_ragspine`` runs the ``ragspine`` command line."""

import sys

from langchain_ragspine.cli import main

sys.exit(main())
