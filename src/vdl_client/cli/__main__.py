"""`python -m vdl_client.cli`: the `vdl` command."""

import sys

from vdl_client.cli import main

sys.exit(main())
