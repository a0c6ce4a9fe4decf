"""``python -m modern`` is ``python -m modern.run``."""
from modern.run import main

main()
