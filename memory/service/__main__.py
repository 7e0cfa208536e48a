"""`python -m memory.service`: the same entry point as `switchboard memory-service`."""

import sys

from memory.service.main import main

sys.exit(main(sys.argv[1:]))
