import sys

from tritonwatch.cli import main

sys.exit(main())
