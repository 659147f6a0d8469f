import sys

from endpoints.sim.cli import main

sys.exit(main())
