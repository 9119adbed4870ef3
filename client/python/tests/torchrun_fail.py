"""A torchrun worker that fails when its agent has MUSTER_TEST_FAIL=1 in its
environment, sleeps MUSTER_TEST_SLEEP seconds when that is set, and
otherwise succeeds at once."""

import os
import sys
import time

time.sleep(float(os.environ.get("MUSTER_TEST_SLEEP", "0")))
sys.exit(1 if os.environ.get("MUSTER_TEST_FAIL") == "1" else 0)
