import sys

from devservices.cli import main

sys.exit(main(sys.argv[1:]))
