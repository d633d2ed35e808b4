import sys

from kgate.entry import main

sys.exit(main())
