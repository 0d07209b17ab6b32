import sys

from tests.faults.chaos.campaign import main

sys.exit(main())
