import sys

from tools.plan.cli import main

sys.exit(main())
