import sys

from tools.charts.cli import main

sys.exit(main())
